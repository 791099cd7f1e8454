#!/usr/bin/env python3
"""Writes a Hugging Face `tokenizer.json` from a GGUF file's tokenizer metadata.

The result lets HF `tokenizers` act as an independent reference on exactly the vocabulary stored
in the GGUF. The mapping mirrors what pagellm's C++ tokenizer (common/tokenizer/) does with the
same keys; where the two must agree on a policy it is spelled out here:

  tokenizer.ggml.model == "gpt2" (byte-level BPE)
    * pre-tokenizer chosen from tokenizer.ggml.pre (see PRE_TOKENIZERS); unknown names fail.
    * control (3) and unknown (2) tokens become special added tokens, user-defined (4) ones
      non-special added tokens; unused (5) tokens are neither.
    * no unk token: bytes missing from the vocabulary are dropped (as llama.cpp does).
  tokenizer.ggml.model == "llama" (SentencePiece BPE with byte fallback)
    * merges are derived from the scores: every split of a normal token into two tokens is a
      merge, ordered by (score descending, token id, left id, right id), the order HF's
      SentencePiece converter produces.
    * "▁" replaces spaces; a "▁" is prepended to each text segment when add_space_prefix.

Usage:
  gguf_tokenizer_to_hf.py MODEL.gguf OUT_DIR      writes OUT_DIR/tokenizer.json and
                                                  OUT_DIR/tokenizer_config.json
Library use (tools/convert/gguf_to_hf.py): build_tokenizer_json(reader) -> dict,
build_tokenizer_config(reader) -> dict, write_tokenizer_files(gguf_path, out_dir).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from gguf import GGUFReader

# GGUF token types.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

# The original regexes of the HF tokenizer.json files these pre-tokenizers come from.
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _byte_level(use_regex: bool, trim_offsets: bool = True) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": trim_offsets,
            "use_regex": use_regex}


def _split(regex: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


def _gpt2_pre() -> dict:
    return _byte_level(True)


def _digits_gpt2_pre() -> dict:
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, _byte_level(True)]}


def _llama3_pre() -> dict:
    return {"type": "Sequence", "pretokenizers": [_split(LLAMA3_REGEX), _byte_level(False)]}


def _qwen2_pre() -> dict:
    return {"type": "Sequence", "pretokenizers": [_split(QWEN2_REGEX), _byte_level(False, False)]}


# tokenizer.ggml.pre -> (HF pre-tokenizer, ignore_merges, add_bos default). Keep in sync with
# common/tokenizer/pre_tokenizer.cc.
PRE_TOKENIZERS = {
    "default": (_gpt2_pre, False, False),
    "gpt2": (_gpt2_pre, False, False),
    "gpt-2": (_gpt2_pre, False, False),
    "phi-2": (_gpt2_pre, False, False),
    "mpt": (_gpt2_pre, False, False),
    "olmo": (_gpt2_pre, False, False),
    "smollm": (_digits_gpt2_pre, False, False),
    "starcoder": (_digits_gpt2_pre, False, False),
    "refact": (_digits_gpt2_pre, False, False),
    "llama3": (_llama3_pre, True, True),
    "llama-v3": (_llama3_pre, True, True),
    "llama-bpe": (_llama3_pre, True, True),
    "qwen2": (_qwen2_pre, False, False),
    "deepseek-r1-qwen": (_qwen2_pre, False, False),
    "stablelm2": (_qwen2_pre, False, False),
}


class ConvertError(Exception):
    pass


def _field(reader: GGUFReader, key: str, default: Any = None) -> Any:
    f = reader.get_field(key)
    if f is None:
        return default
    return f.contents()


def _read_vocab(reader: GGUFReader) -> dict:
    model = _field(reader, "tokenizer.ggml.model")
    if model not in ("gpt2", "llama"):
        raise ConvertError(f"unsupported tokenizer.ggml.model {model!r}")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    if not tokens:
        raise ConvertError("tokenizer.ggml.tokens missing or empty")
    n = len(tokens)
    types = _field(reader, "tokenizer.ggml.token_type") or [NORMAL] * n
    scores = _field(reader, "tokenizer.ggml.scores") or [0.0] * n
    if len(types) != n or len(scores) != n:
        raise ConvertError("token_type / scores length differs from tokens")
    merges = _field(reader, "tokenizer.ggml.merges") or []
    pre = _field(reader, "tokenizer.ggml.pre", "default")
    is_spm = model == "llama"
    if not is_spm and pre not in PRE_TOKENIZERS:
        raise ConvertError(f"unsupported tokenizer.ggml.pre {pre!r}")
    add_bos_default = True if is_spm else PRE_TOKENIZERS[pre][2]
    return {
        "model": model, "pre": pre, "tokens": tokens, "types": types, "scores": scores,
        "merges": merges,
        "bos": _field(reader, "tokenizer.ggml.bos_token_id"),
        "eos": _field(reader, "tokenizer.ggml.eos_token_id"),
        "unk": _field(reader, "tokenizer.ggml.unknown_token_id"),
        "add_bos": bool(_field(reader, "tokenizer.ggml.add_bos_token", add_bos_default)),
        "add_eos": bool(_field(reader, "tokenizer.ggml.add_eos_token", False)),
        "add_space_prefix": bool(_field(reader, "tokenizer.ggml.add_space_prefix", is_spm))
                            if is_spm else False,
        "chat_template": _field(reader, "tokenizer.chat_template"),
    }


def _added_tokens(v: dict) -> list:
    out = []
    for i, (tok, ty) in enumerate(zip(v["tokens"], v["types"])):
        if ty in (CONTROL, UNKNOWN, USER_DEFINED):
            out.append({"id": i, "content": tok, "single_word": False, "lstrip": False,
                        "rstrip": False, "normalized": False,
                        "special": ty in (CONTROL, UNKNOWN)})
    return out


def spm_merges(tokens: list, types: list, scores: list) -> list:
    """Merges implied by a SentencePiece vocabulary's scores (see the module comment)."""
    ids = {}
    for i, (tok, ty) in enumerate(zip(tokens, types)):
        if ty != UNUSED:
            ids.setdefault(tok, i)
    order = sorted((i for i, ty in enumerate(types) if ty == NORMAL),
                   key=lambda i: (-scores[i], i))
    merges = []
    for i in order:
        tok = tokens[i]
        local = []
        for k in range(1, len(tok)):
            left, right = tok[:k], tok[k:]
            if left in ids and right in ids:
                local.append((ids[left], ids[right], left, right))
        local.sort()
        merges.extend([left, right] for _, _, left, right in local)
    return merges


def _post_processor(v: dict) -> dict | None:
    if not v["add_bos"] and not v["add_eos"]:
        return None
    single, pair, special = [], [], {}

    def add(tid):
        tok = v["tokens"][tid]
        special[tok] = {"id": tok, "ids": [tid], "tokens": [tok]}
        return {"SpecialToken": {"id": tok, "type_id": 0}}

    if v["add_bos"]:
        if v["bos"] is None:
            raise ConvertError("add_bos_token set but no bos_token_id")
        single.append(add(v["bos"]))
    single.append({"Sequence": {"id": "A", "type_id": 0}})
    if v["add_eos"]:
        if v["eos"] is None:
            raise ConvertError("add_eos_token set but no eos_token_id")
        single.append(add(v["eos"]))
    pair = single + [x if "SpecialToken" in x else {"Sequence": {"id": "B", "type_id": 1}}
                     for x in single]
    return {"type": "TemplateProcessing", "single": single, "pair": pair,
            "special_tokens": special}


def build_tokenizer_json(reader: GGUFReader) -> dict:
    """Returns the tokenizer.json document (a dict) for the GGUF opened by `reader`."""
    v = _read_vocab(reader)
    tokens, types = v["tokens"], v["types"]
    vocab = {}
    for i, tok in enumerate(tokens):
        if tok in vocab:
            raise ConvertError(f"duplicate token {tok!r} at ids {vocab[tok]} and {i}")
        vocab[tok] = i
    if v["model"] == "gpt2":
        make_pre, ignore_merges, _ = PRE_TOKENIZERS[v["pre"]]
        merges = []
        for m in v["merges"]:
            sp = m.find(" ", 1)
            if sp < 0:
                raise ConvertError(f"merge {m!r} has no separator")
            merges.append([m[:sp], m[sp + 1:]])
        return {
            "version": "1.0", "truncation": None, "padding": None,
            "added_tokens": _added_tokens(v),
            "normalizer": None,
            "pre_tokenizer": make_pre(),
            "post_processor": _post_processor(v),
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                      "vocab": vocab, "merges": merges},
        }
    # SentencePiece BPE ("llama").
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    if v["add_space_prefix"]:
        normalizer = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"}, replace]}
    else:
        normalizer = replace
    decoders = [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}]
    if v["add_space_prefix"]:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    unk = v["unk"]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": _added_tokens(v),
        "normalizer": normalizer,
        "pre_tokenizer": None,
        "post_processor": _post_processor(v),
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {"type": "BPE", "dropout": None,
                  "unk_token": tokens[unk] if unk is not None else None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": spm_merges(tokens, types, v["scores"])},
    }


def build_tokenizer_config(reader: GGUFReader) -> dict:
    """Returns a minimal tokenizer_config.json (special token names, chat template)."""
    v = _read_vocab(reader)
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": v["add_bos"],
           "add_eos_token": v["add_eos"], "clean_up_tokenization_spaces": False}
    for key in ("bos", "eos", "unk"):
        if v[key] is not None and 0 <= v[key] < len(v["tokens"]):
            cfg[f"{key}_token"] = v["tokens"][v[key]]
    if v["chat_template"]:
        cfg["chat_template"] = v["chat_template"]
    return cfg


def write_tokenizer_files(gguf_path: str, out_dir: str) -> None:
    """Writes out_dir/tokenizer.json and out_dir/tokenizer_config.json."""
    reader = GGUFReader(gguf_path)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(build_tokenizer_json(reader), f, ensure_ascii=False)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(build_tokenizer_config(reader), f, ensure_ascii=False, indent=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out_dir")
    args = ap.parse_args()
    try:
        write_tokenizer_files(args.gguf, args.out_dir)
    except (ConvertError, OSError, ValueError) as e:
        print(f"gguf_tokenizer_to_hf: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
