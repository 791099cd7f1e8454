#!/usr/bin/env python3
"""Writes a few small valid GGUF files (made with the `gguf` package) as a fuzzing seed corpus.

Usage: .venv/bin/python tools/fuzz/make_gguf_seeds.py OUT_DIR   (OUT_DIR should be git-ignored)
"""
import os
import sys

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType as T


def Seed(path, alignment=None, tensors=True):
    w = GGUFWriter(path, "llama")
    if alignment is not None:
        w.add_uint32("general.alignment", alignment)
    w.add_block_count(2)
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_array("tokenizer.ggml.tokens", ["<s>", "a", "b"])
    w.add_array("tokenizer.ggml.scores", [0.0, -1.0, -2.0])
    w.add_int64("x.i64", -5)
    w.add_float64("x.f64", 0.25)
    if tensors:
        w.add_tensor("a.weight", np.arange(8, dtype=np.float32).reshape(2, 4))
        w.add_tensor("b.weight", np.zeros(34, dtype=np.uint8), raw_dtype=T.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    Seed(os.path.join(out, "seed_default.gguf"))
    Seed(os.path.join(out, "seed_align64.gguf"), alignment=64)
    Seed(os.path.join(out, "seed_no_tensors.gguf"), tensors=False)


if __name__ == "__main__":
    main()
