#!/usr/bin/env python3
"""Rewrites a GGUF file with every tensor dequantized to F32; all metadata is kept.

Usage: gguf_to_f32.py IN.gguf OUT.gguf        (put OUT under models/, which git ignores)

Dequantization is the `gguf` package's (gguf.quants.dequantize, a NumPy port of ggml's
dequantize_row_*), so llama.cpp and pagellm can both run the fidelity test on identical fp32
weights. general.file_type becomes 0 (ALL_F32). Tensors are converted and written one at a time,
so memory use stays near the size of the largest tensor.
"""
import argparse
import sys

import numpy as np
import gguf


def copy_metadata(reader: gguf.GGUFReader, writer: gguf.GGUFWriter) -> None:
    for field in reader.fields.values():
        # GGUF.* are the reader's virtual fields; the writer adds the architecture itself.
        if field.name.startswith("GGUF.") or field.name == gguf.Keys.General.ARCHITECTURE:
            continue
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if field.name == gguf.Keys.General.FILE_TYPE:
            value = int(gguf.LlamaFileType.ALL_F32)
        writer.add_key_value(field.name, value, vtype, sub_type=sub_type)


def dequantized(tensor) -> np.ndarray:
    """The tensor as float32 in NumPy order (the reverse of GGUF's dims)."""
    shape = tuple(int(d) for d in reversed(tensor.shape))
    values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    return np.ascontiguousarray(values, dtype=np.float32).reshape(shape)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    args = ap.parse_args()

    reader = gguf.GGUFReader(args.input)
    arch_field = reader.get_field(gguf.Keys.General.ARCHITECTURE)
    if arch_field is None:
        print(f"{args.input}: no general.architecture", file=sys.stderr)
        return 1
    writer = gguf.GGUFWriter(args.output, arch=arch_field.contents())
    alignment = reader.get_field(gguf.Keys.General.ALIGNMENT)
    if alignment is not None:
        writer.data_alignment = alignment.contents()
    copy_metadata(reader, writer)

    for t in reader.tensors:
        shape = [int(d) for d in reversed(t.shape)]
        nbytes = int(np.prod(shape, dtype=np.int64)) * 4
        writer.add_tensor_info(t.name, shape, np.dtype(np.float32), nbytes)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        writer.write_tensor_data(dequantized(t))
    writer.close()
    print(f"wrote {len(reader.tensors)} F32 tensors to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
