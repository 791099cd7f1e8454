#!/usr/bin/env python3
"""Quantizes a GGUF with llama.cpp's own quantizer (llama_model_quantize in llama-cpp-python,
the pinned reference build of tools/requirements-reference.txt), as `llama-quantize` would.

pagellm commits no models; the K-quant files its tests and benchmarks use are made with this from
the F32 conversion of the default model (tools/prepare_models.sh):

  .venv/bin/python tools/convert/llamacpp_quantize.py models/SmolLM2-135M-Instruct.F32.gguf \\
      models/SmolLM2-135M-Instruct.Q4_K_M.gguf --type Q4_K_M

llama.cpp picks each tensor's type from the file type: for Q4_K_M mostly Q4_K with Q6_K for some
attn_v / ffn_down / the output, and, for rows that are not whole 256-element super-blocks
(SmolLM2's 576 columns), its fallbacks Q5_0 (for Q4_K) and Q8_0 (for Q6_K). No importance matrix:
the result depends only on the input file. Needs `tools/setup.sh --reference`.
"""
import argparse
import ctypes
import os
import sys

TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--type", default="Q4_K_M", choices=TYPES)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{args.type}")
    params.nthread = args.threads
    tmp = args.output + ".tmp"
    rc = llama_cpp.llama_model_quantize(args.input.encode(), tmp.encode(), ctypes.byref(params))
    if rc != 0:
        sys.exit(f"llamacpp_quantize: llama_model_quantize failed ({rc})")
    os.replace(tmp, args.output)
    print(f"llamacpp_quantize: wrote {args.output} ({os.path.getsize(args.output)} bytes, "
          f"llama-cpp-python {llama_cpp.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
