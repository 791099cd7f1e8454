#!/usr/bin/env bash
# Configures and builds pagellm into build/ (binaries in build/bin/). Extra arguments go to
# CMake, e.g. tools/build.sh -DPAGELLM_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j"$(nproc)"
