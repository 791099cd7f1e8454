#!/usr/bin/env python3
"""Converts a Llama-architecture GGUF into a Hugging Face checkpoint directory (F32 weights).

Usage: gguf_to_hf.py IN.gguf OUT_DIR [--shards N]
       gguf_to_hf.py --self-check

OUT_DIR receives config.json (LlamaForCausalLM, from the GGUF metadata), the weights as
model.safetensors (or, with --shards N > 1, N files model-0000i-of-0000N.safetensors plus
model.safetensors.index.json), and tokenizer.json / tokenizer_config.json from
tools/convert/gguf_tokenizer_to_hf.py. Every tensor is dequantized with the `gguf` package.

Q/K layout. llama.cpp's convert_hf_to_gguf.py permutes the rows of q_proj and k_proj so that
ggml's "normal" RoPE, which rotates adjacent pairs (2i, 2i+1), matches Hugging Face's
rotate-half RoPE, which rotates (i, i + head_dim/2). Per head its `permute` does
    w.reshape(n_head, 2, head_dim // 2, cols).swapaxes(1, 2).reshape(rows, cols)
(with n_head = n_head_kv for k_proj), i.e. GGUF row 2i+j of a head is HF row j*head_dim/2 + i.
unpermute() below inverts it. --self-check verifies numerically that (a) unpermute inverts
permute and (b) rotate-half RoPE on the un-permuted rows equals pair-wise RoPE on the GGUF rows
after the same permutation, so attention scores q.k are unchanged.
"""
import argparse
import json
import os
import sys

import numpy as np
import gguf
import safetensors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_tokenizer_to_hf  # noqa: E402  (tools/convert/, written alongside this script)


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's HF -> GGUF row permutation (reference for the self-check)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """GGUF -> HF: the inverse of permute()."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


def rope_pairs(x: np.ndarray, pos: int, theta: float) -> np.ndarray:
    """ggml 'normal' RoPE on one head: rotates (x[2i], x[2i+1]) by pos * theta^(-2i/d)."""
    d = x.shape[0]
    ang = pos * theta ** (-np.arange(0, d, 2) / d)
    out = x.copy()
    out[0::2] = x[0::2] * np.cos(ang) - x[1::2] * np.sin(ang)
    out[1::2] = x[0::2] * np.sin(ang) + x[1::2] * np.cos(ang)
    return out


def rope_half(x: np.ndarray, pos: int, theta: float) -> np.ndarray:
    """HF rotate-half RoPE on one head: rotates (x[i], x[i+d/2]) by pos * theta^(-2i/d)."""
    d = x.shape[0]
    ang = pos * theta ** (-np.arange(0, d, 2) / d)
    a, b = x[: d // 2], x[d // 2:]
    return np.concatenate([a * np.cos(ang) - b * np.sin(ang), a * np.sin(ang) + b * np.cos(ang)])


def self_check() -> None:
    rng = np.random.default_rng(0)
    n_head, head_dim, cols = 3, 8, 5
    w_hf = rng.standard_normal((n_head * head_dim, cols))
    w_gguf = permute(w_hf, n_head)
    assert np.array_equal(unpermute(w_gguf, n_head), w_hf), "unpermute does not invert permute"
    assert np.array_equal(permute(unpermute(w_gguf, n_head), n_head), w_gguf)
    assert not np.array_equal(w_gguf, w_hf)
    x = rng.standard_normal(cols)
    for pos in (0, 1, 7, 100):
        for h in range(n_head):
            rows = slice(h * head_dim, (h + 1) * head_dim)
            hf = rope_half(w_hf[rows] @ x, pos, 10000.0)
            gg = rope_pairs(w_gguf[rows] @ x, pos, 10000.0)
            # The GGUF result is the HF result with the rows permuted the same way.
            assert np.allclose(permute(hf[:, None], 1)[:, 0], gg), "RoPE layouts disagree"
    print("self-check ok: unpermute inverts llama.cpp's permute; RoPE layouts agree")


def field(reader: gguf.GGUFReader, key: str, default=None):
    f = reader.get_field(key)
    return default if f is None else f.contents()


def short_float(v: float) -> float:
    """A float32 metadata value as its shortest decimal (9.99999974e-06 -> 1e-05)."""
    return float(str(np.float32(v)))


def make_config(reader: gguf.GGUFReader, tensors: dict) -> dict:
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise SystemExit(f"general.architecture is {arch!r}; only 'llama' is supported")
    n_embd = field(reader, "llama.embedding_length")
    n_head = field(reader, "llama.attention.head_count")
    n_kv = field(reader, "llama.attention.head_count_kv", n_head)
    head_dim = field(reader, "llama.attention.key_length", n_embd // n_head)
    if field(reader, "llama.rope.dimension_count", head_dim) != head_dim:
        raise SystemExit("partial rotary embeddings are not supported")
    if "rope_freqs.weight" in tensors:
        raise SystemExit("rope_freqs.weight (llama3 RoPE factors) is not supported")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": int(tensors["token_embd.weight"].shape[1]),
        "hidden_size": n_embd,
        "intermediate_size": field(reader, "llama.feed_forward_length"),
        "num_hidden_layers": field(reader, "llama.block_count"),
        "num_attention_heads": n_head,
        "num_key_value_heads": n_kv,
        "head_dim": head_dim,
        "max_position_embeddings": field(reader, "llama.context_length"),
        "rms_norm_eps": short_float(field(reader, "llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": short_float(field(reader, "llama.rope.freq_base", 10000.0)),
        "rope_scaling": None,
        "tie_word_embeddings": "output.weight" not in tensors,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "torch_dtype": "float32",
    }
    scaling = field(reader, "llama.rope.scaling.type")
    if scaling == "linear":
        factor = field(reader, "llama.rope.scaling.factor")
        config["rope_scaling"] = {"rope_type": "linear", "factor": short_float(factor)}
    elif scaling not in (None, "none"):
        raise SystemExit(f"llama.rope.scaling.type {scaling!r} is not supported")
    for key, name in (("bos_token_id", "tokenizer.ggml.bos_token_id"),
                      ("eos_token_id", "tokenizer.ggml.eos_token_id"),
                      ("pad_token_id", "tokenizer.ggml.padding_token_id")):
        if field(reader, name) is not None:
            config[key] = field(reader, name)
    return config


# GGUF suffix in blk.N.<suffix> -> HF name under model.layers.N.
LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def hf_name(gguf_name: str) -> str:
    if gguf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[gguf_name]
    parts = gguf_name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in LAYER_NAMES:
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}"
    raise SystemExit(f"tensor {gguf_name!r} has no Hugging Face counterpart here")


def convert_tensor(t, config: dict) -> np.ndarray:
    shape = tuple(int(d) for d in reversed(t.shape))
    w = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
    w = w.reshape(shape)
    if t.name.endswith(".attn_q.weight"):
        w = unpermute(w, config["num_attention_heads"])
    elif t.name.endswith(".attn_k.weight"):
        w = unpermute(w, config["num_key_value_heads"])
    return np.ascontiguousarray(w)


def write_shard(path: str, tensors: dict) -> None:
    flat = {n: {"dtype": "float32", "shape": list(w.shape), "data": w.astype("<f4").tobytes()}
            for n, w in tensors.items()}
    with open(path, "wb") as f:
        f.write(bytes(safetensors.serialize(flat, metadata={"format": "pt"})))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input", nargs="?")
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--shards", type=int, default=1, help="number of safetensors files")
    ap.add_argument("--self-check", action="store_true", help="verify the Q/K un-permutation")
    args = ap.parse_args()
    self_check()
    if args.self_check:
        return 0
    if not args.input or not args.out_dir or args.shards < 1:
        ap.error("need IN.gguf OUT_DIR and --shards >= 1")

    reader = gguf.GGUFReader(args.input)
    by_name = {t.name: t for t in reader.tensors}
    config = make_config(reader, by_name)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)

    # Shards are filled in GGUF order, balanced by bytes; only one shard is in memory at a time.
    total = sum(int(np.prod([int(d) for d in t.shape])) * 4 for t in reader.tensors)
    per_shard = -(-total // args.shards)
    names = [f"model-{i + 1:05d}-of-{args.shards:05d}.safetensors" for i in range(args.shards)]
    if args.shards == 1:
        names = ["model.safetensors"]
    weight_map, current, current_bytes, shard = {}, {}, 0, 0
    for t in reader.tensors:
        w = convert_tensor(t, config)
        if current and current_bytes + w.nbytes > per_shard and shard + 1 < args.shards:
            write_shard(os.path.join(args.out_dir, names[shard]), current)
            current, current_bytes, shard = {}, 0, shard + 1
        name = hf_name(t.name)
        current[name] = w
        current_bytes += w.nbytes
        weight_map[name] = names[shard]
    write_shard(os.path.join(args.out_dir, names[shard]), current)
    if args.shards > 1:
        if shard + 1 < args.shards:
            raise SystemExit(f"only {shard + 1} shards were needed; ask for fewer")
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        with open(os.path.join(args.out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)

    gguf_tokenizer_to_hf.write_tokenizer_files(args.input, args.out_dir)
    print(f"wrote {len(weight_map)} tensors in {shard + 1} file(s) to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
