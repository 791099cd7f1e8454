#!/usr/bin/env bash
# One command from a fresh Debian 12 machine: install, build, fetch the default model and
# generate a completion with it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
tools/fetch_model.sh
exec build/bin/pagellm generate --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
  --prompt "${1:-The capital of France is}" --max-tokens "${2:-32}" --temperature 0
