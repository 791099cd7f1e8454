#!/usr/bin/env python3
"""Rewrites the generated seed corpora under tools/fuzz/seeds/ (committed; rerun after changing
this script or the chat-template fixture's table):

  safetensors_file_fuzz/  small .safetensors files, whole and as HEADER\\0DATA (see the fuzzer)
  request_bytes_fuzz/     pagellm.v1.GenerateRequest wire bytes (encoded by hand, as the proto is
                          tiny and this keeps the script free of generated code)
  hf_tokenizer_json_fuzz/byte_level_all_bytes.json
                          a byte-level tokenizer.json that spells all 256 bytes
  chat_template_fuzz/     the real and feature templates of tools/fixtures/
                          make_chat_template_fixture.py (plus SmolLM2's from models/ when present),
                          each with a conversation it renders, in chat_template_fuzz.cc's format

The other seeds (hf_config_fuzz/, hf_tokenizer_json_fuzz/'s other files, tokenizer_fuzz/) are
written by hand.

Usage: .venv/bin/python tools/fuzz/make_seeds.py   (needs jinja2, which the fixture module imports)
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def Write(target, name, data):
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


# ---- safetensors ----

DTYPE_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2,
              "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}


def Safetensors(tensors, metadata=None):
    """(header JSON bytes, data bytes) for [(name, dtype, shape)], laid out in order."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = DTYPE_SIZE[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the reference writer pads to 8 bytes
    return text, bytes((i * 37) & 0xFF for i in range(offset))


def SafetensorsSeeds():
    files = {
        "f32_bf16": Safetensors([("model.embed_tokens.weight", "F32", [2, 2]),
                                 ("model.norm.weight", "BF16", [3])], {"format": "pt"}),
        "all_dtypes": Safetensors([(f"t.{d.lower()}", d, [2]) for d in DTYPE_SIZE]),
        "scalar_and_empty": Safetensors([("s", "F16", []), ("z", "F32", [0, 4]),
                                         ("w", "I64", [1, 3])]),
        "no_tensors": Safetensors([], {"a": "b"}),
    }
    for name, (text, data) in files.items():
        Write("safetensors_file_fuzz", name + ".safetensors",
              struct.pack("<Q", len(text)) + text + data)
        Write("safetensors_file_fuzz", name + ".split", text + b"\0" + data)


# ---- GenerateRequest wire bytes ----

def Varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def Field(number, value):
    if isinstance(value, bool) or isinstance(value, int):
        return Varint(number << 3) + Varint(int(value) & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return Varint(number << 3 | 5) + struct.pack("<f", value)
    value = value.encode() if isinstance(value, str) else value
    return Varint(number << 3 | 2) + Varint(len(value)) + value


def Sampling(**fields):
    numbers = {"temperature": 1, "top_p": 2, "top_k": 3, "min_p": 4, "repetition_penalty": 5,
               "seed": 8, "max_tokens": 9, "min_tokens": 10, "ignore_eos": 11, "stop": 12,
               "stop_token_ids": 13, "logprobs": 15, "skip_special_tokens": 16, "n": 17,
               "beam_width": 18, "length_penalty": 19, "early_stopping": 20}
    out = b""
    for key, value in fields.items():
        if key == "stop":
            out += b"".join(Field(12, s) for s in value)
        elif key == "stop_token_ids":
            out += Field(13, b"".join(Varint(i & 0xFFFFFFFFFFFFFFFF) for i in value))
        else:
            out += Field(numbers[key], value)
    return Field(5, out)


def Chat(messages, add_generation_prompt=None):
    body = b"".join(Field(1, Field(1, r) + Field(2, c)) for r, c in messages)
    if add_generation_prompt is not None:
        body += Field(2, add_generation_prompt)
    return Field(4, body)


def RequestSeeds():
    seeds = {
        "text": Field(1, "req-1") + Field(2, "héllo wörld") +
                Sampling(temperature=0.7, top_p=0.9, max_tokens=16, stop=["\n", "END"]),
        "text_all_sampling": Field(2, "x") + Field(6, True) + Sampling(
            temperature=0.0, top_k=-1, min_p=0.05, repetition_penalty=1.1, seed=2**64 - 1,
            max_tokens=1, min_tokens=0, ignore_eos=True, stop_token_ids=[2, -1, 49151],
            logprobs=5, skip_special_tokens=False, n=2, beam_width=4, length_penalty=1.5,
            early_stopping=True),
        "token_ids": Field(1, "") + Field(3, Field(1, b"".join(Varint(i) for i in [1, 2, 3]))),
        "chat": Chat([("system", "Be brief."), ("user", "Hi 😀")], add_generation_prompt=True) +
                Sampling(max_tokens=8),
        "chat_empty": Chat([]),
        "bad_utf8_text": Field(2, b"\xff\xfe"),
        "bad_utf8_stop": Field(2, "ok") + Sampling(stop=[b"\xc3"]),
        "empty": b"",
    }
    for name, data in seeds.items():
        Write("request_bytes_fuzz", name + ".bin", data)


# ---- tokenizer.json ----

def ByteLevelAlphabet():
    """GPT-2's byte -> printable character table (byte_level.h)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def HfTokenizerJsonSeeds():
    chars = ByteLevelAlphabet()
    vocab = {chars[b]: b for b in range(256)}
    sp = chars[ord(" ")]
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (sp, "w"), (sp + "w", "o"),
              ("1", "2"), (chars[0xC3], chars[0xA9])]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    added = [{"id": len(vocab) + i, "content": text, "special": special}
             for i, (text, special) in enumerate([("<|endoftext|>", True), ("<|im_start|>", True),
                                                   ("<|im_end|>", True), ("<tool>", False)])]
    doc = {"version": "1.0", "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                             "trim_offsets": True, "use_regex": True},
           "post_processor": None, "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False,
                     "vocab": vocab, "merges": [f"{l} {r}" for l, r in merges]}}
    Write("hf_tokenizer_json_fuzz", "byte_level_all_bytes.json",
          json.dumps(doc, ensure_ascii=False, indent=1))


# ---- chat templates ----

def ChatTemplateSeed(flags, source, messages):
    parts = [source] + [x for m in messages for x in (m["role"], m["content"])]
    return bytes([flags]) + "\0".join(parts).encode()


def ChatTemplateSeeds():
    sys.path.insert(0, os.path.join(REPO, "tools", "fixtures"))
    import make_chat_template_fixture as fixture  # pylint: disable=import-outside-toplevel

    templates = dict(fixture.TEMPLATES)
    config = os.path.join(REPO, "models", "SmolLM2-135M-Instruct-hf", "tokenizer_config.json")
    if os.path.exists(config):
        with open(config, encoding="utf-8") as f:
            templates["smollm2"] = json.load(f)["chat_template"]
    conversations = list(fixture.CONVERSATIONS.values())
    env = fixture.make_environment()
    bos_eos = [("<s>", "</s>"), ("<|im_start|>", "<|im_end|>"), ("<|begin_of_text|>", "<|eot_id|>"),
               ("", "")]  # as chat_template_fuzz.cc's flags bits 1-2 pick them
    named = list(templates.items()) + [("feature_" + k, v) for k, v in fixture.FEATURES.items()]
    for i, (name, source) in enumerate(named):
        variant = i % 4
        flags = 1 | variant << 1  # add_generation_prompt
        # The first conversation, from the i-th on, that the template renders without error in
        # Python jinja2 (the error cases are seeds too when none does).
        messages = conversations[i % len(conversations)]
        try:
            compiled = env.from_string(source)
        except Exception:  # noqa: BLE001 - a syntax-error feature template
            compiled = None
        for k in range(len(conversations)):
            candidate = conversations[(i + k) % len(conversations)]
            if compiled is not None and fixture.render(compiled, candidate, True,
                                                       *bos_eos[variant])[0] is not None:
                messages = candidate
                break
        Write("chat_template_fuzz", name + ".txt", ChatTemplateSeed(flags, source, messages))


def main():
    SafetensorsSeeds()
    RequestSeeds()
    HfTokenizerJsonSeeds()
    ChatTemplateSeeds()


if __name__ == "__main__":
    main()
