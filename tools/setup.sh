#!/usr/bin/env bash
# Installs what pagellm needs on Debian 12. Idempotent: a second run changes nothing.
#   tools/setup.sh               Debian packages + the Python test tools in .venv/
#   tools/setup.sh --reference   also llama-cpp-python (builds llama.cpp from source; needed only
#                                to regenerate fidelity fixtures and for tools/bench/)
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(build-essential cmake ninja-build pkg-config git unzip ca-certificates clang-format
  python3 python3-venv python3-pip
  libabsl-dev libpcre2-dev libopenblas-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc prometheus-cpp-dev libssl-dev
  libcpp-httplib-dev libgloo-dev libboost-dev libboost-context-dev
  prometheus debootstrap buildah podman)

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.requirements-test.sha
want=$(sha256sum tools/requirements-test.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r tools/requirements-test.txt
  echo "$want" > "$stamp"
fi

if [ "${1:-}" = "--reference" ]; then
  stamp=.venv/.requirements-reference.sha
  want=$(sha256sum tools/requirements-reference.txt | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    CMAKE_ARGS="-DGGML_NATIVE=ON" .venv/bin/pip install -q -r tools/requirements-reference.txt
    echo "$want" > "$stamp"
  fi
fi
echo "setup: ok"
