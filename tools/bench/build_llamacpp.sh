#!/usr/bin/env bash
# Builds llama.cpp's llama-bench and llama-batched-bench, the benchmark peers of pagellm.
#
# The llama.cpp source is the one vendored in the llama-cpp-python sdist pinned in
# tools/requirements-reference.txt, so benchmarks and fidelity fixtures use the same llama.cpp.
# Source goes to third_party/ and the build to build-llamacpp/ (both git-ignored).
# Idempotent: a second run only re-checks the build.
#
#   tools/bench/build_llamacpp.sh     -> build-llamacpp/bin/llama-bench, llama-batched-bench
#   JOBS=4 tools/bench/build_llamacpp.sh   (default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=$(sed -n 's/^llama-cpp-python==\([0-9.]*\).*/\1/p' tools/requirements-reference.txt)
[ -n "$VERSION" ] || { echo "build_llamacpp: no llama-cpp-python pin found" >&2; exit 1; }
SDIST_DIR=third_party/sdist
SRC=third_party/llama-cpp-python-$VERSION/vendor/llama.cpp
BUILD=build-llamacpp
PIP=.venv/bin/pip
[ -x "$PIP" ] || PIP="python3 -m pip"

if [ ! -f "$SRC/CMakeLists.txt" ]; then
  mkdir -p "$SDIST_DIR"
  sdist=$(ls "$SDIST_DIR"/llama_cpp_python-"$VERSION".tar.gz 2>/dev/null || true)
  if [ -z "$sdist" ]; then
    $PIP download -q --no-deps --no-binary :all: -d "$SDIST_DIR" "llama-cpp-python==$VERSION"
    sdist=$(ls "$SDIST_DIR"/llama_cpp_python-"$VERSION".tar.gz)
  fi
  mkdir -p third_party
  tar -xzf "$sdist" -C third_party
  # The sdist unpacks as llama_cpp_python-X; name it after the pin.
  [ -d "third_party/llama_cpp_python-$VERSION" ] &&
    rm -rf "third_party/llama-cpp-python-$VERSION" &&
    mv "third_party/llama_cpp_python-$VERSION" "third_party/llama-cpp-python-$VERSION"
fi

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF
fi
cmake --build "$BUILD" --target llama-bench llama-batched-bench -j "${JOBS:-2}"
ls -1 "$BUILD"/bin/llama-bench "$BUILD"/bin/llama-batched-bench
