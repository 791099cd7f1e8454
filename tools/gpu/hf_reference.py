#!/usr/bin/env python3
"""Builds two random-weight reference checkpoints and transformers' greedy continuations for them.

  python3 tools/gpu/hf_reference.py --out DIR --tokenizer PATH/tokenizer.json
      [--device cuda|cpu] [--dtype bfloat16|float32] [--prompts 32] [--max-tokens 64]
      [--max-prompt-tokens 1500] [--check-dtype float32] [--tiny]
      [--beam-prompts 8] [--beam-width 2] [--beam-tokens 16]

Writes, for each model in MODELS (llama3: LlamaForCausalLM, GQA 16/4, head_dim 128, llama3 RoPE
scaling; qwen2: Qwen2ForCausalLM, QKV bias, GQA 16/2, head_dim 64; 4 layers each):
  DIR/<name>/model.safetensors, config.json   bf16 weights, built from a seed (no downloads)
  DIR/<name>/tokenizer.json (+ tokenizer_config.json when it sits beside --tokenizer)
  DIR/<name>/ref.json   {"model", "prompts": [[ids]], "greedy": [[ids]], "max_tokens", "dtype",
                         "device", "beam"}: greedy continuations of exactly --max-tokens tokens
                         (EOS never stops them), batch 1, from the checkpoint as loaded back in
                         --dtype; "beam": {"width", "max_tokens", "beams": [[[ids] x width]]},
                         transformers' beam search on the first --beam-prompts prompts (no EOS:
                         every beam is --beam-tokens long; length penalty 1), best first
  DIR/<name>/hf_<check-dtype>.json   with --check-dtype: transformers in that dtype, in the format
                         of our tool's output ({"greedy", "teacher_forced_top1", "beams"}), for
                         compare.py:
                         the noise floor between two transformers precisions.
Prompts are reference_texts.txt (beside this script), tokenized with the `tokenizers` library and
cut to lengths spread geometrically from 5 to --max-prompt-tokens.

Weights ("bigram switch" init, from SEED). With transformers' default init (std 0.02) the logits
of a random model are nearly flat and greedy decisions flip on rounding noise (6% of them between
bf16 and fp32). Here every token t has two candidate successors whose lm_head rows are aligned
with t's embedding (a coherent sum over hidden_size, far above the other rows); the first wins by
KAPPA unless the layers' output, read through a random direction per pair (MODELS' switch),
outweighs it. So ~5% of the decisions are made by the layers (attention, MLP, RoPE, biases) and
the rest by embedding, final norm and lm_head, all with margins well above bf16 noise. A
constant feature (coordinate 0 of every embedding, which no layer writes) lets lm_head shift both
candidates' logits towards 0, where bf16 logits are fine-grained enough not to tie them. Norm
weights and QKV biases are random, so ignoring them changes decisions. Measured on the CPU over
all positions of 1500-token random-id sequences: bf16 and fp32 disagree on 0.03% (llama3) and
0.06% (qwen2) of decisions; a wrong query-to-KV-head mapping changes 2% and 6%, dropping the
llama3 scaling 0.4%, zeroing qwen2's k bias 0.2%. Errors near bf16 noise are the kernel tests'
to catch, not this check's.

config.json also carries rope_theta and rope_scaling in the pre-v5 spelling beside transformers
v5's rope_parameters, for readers that know only the older keys.
"""

import argparse
import json
import math
import os
import shutil
import sys
import time

import torch
import transformers
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))

MODELS = {
    "llama3": dict(
        cls="LlamaForCausalLM", hidden_size=2048, intermediate_size=5632, num_hidden_layers=4,
        num_attention_heads=16, num_key_value_heads=4, head_dim=128, rms_norm_eps=1e-5,
        max_position_embeddings=8192, attention_bias=False, switch=0.06,
        # original_max_position_embeddings 1024 (Llama 3.1: 8192) puts all three regions of the
        # llama3 scaling (kept, blended, divided by factor) inside the prompts' positions.
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 1024}),
    "qwen2": dict(
        cls="Qwen2ForCausalLM", hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
        num_attention_heads=16, num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-6,
        max_position_embeddings=8192, switch=0.05,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
}
# head_dim 64: the smallest the CUDA kernels take, so the tiny models also serve the CUDA
# emulator's rehearsal (check.sh emu).
TINY = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=64)

SEED = 1234
# Weight std = GAIN / sqrt(fan_in), so the sizes below hold for any hidden size. GAIN 0.64 is
# transformers' default (std 0.02) at fan_in 1024.
GAIN = 0.64
QK_GAIN = 0.96       # q_proj/k_proj: attention somewhat peaked
O_GAIN = 1.28        # o_proj: the layers' output about the embedding's size
DOWN_GAIN = 2.12     # down_proj (its input, silu(gate) * up, is small)
BIAS_STD = 0.5       # QKV bias std, relative to the std of the projection's output
NORM_STD = 0.1       # RMSNorm weights ~ 1 + N(0, NORM_STD)
FEATURE = 4.0        # embedding coordinate 0 (constant; no layer writes it)
KAPPA = 0.3          # relative margin of the first candidate
# MODELS' switch: the context direction's size per pair, relative to hidden_size; it sets the
# fraction of decisions that the layers' output decides (~5% here).
MIN_PROMPT = 5


def Normal(g, shape, std):
    return torch.randn(shape, generator=g) * std


def InitWeights(model, seed, switch):
    """Sets every parameter of model (fp32, on the CPU) from seed; see the module comment."""
    g = torch.Generator().manual_seed(seed)
    d = model.config.hidden_size
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in sorted(params):
            p = params[name]
            gain = QK_GAIN if name.endswith(("q_proj.weight", "k_proj.weight", "q_proj.bias",
                                             "k_proj.bias")) else GAIN
            if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                p.copy_(1 + Normal(g, p.shape, NORM_STD))
            elif name.endswith("_proj.bias"):
                p.copy_(Normal(g, p.shape, BIAS_STD * gain))
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                gain = O_GAIN if name.endswith("o_proj.weight") else DOWN_GAIN
                p.copy_(Normal(g, p.shape, gain / math.sqrt(p.shape[1])))
                p[0] = 0  # coordinate 0 of the residual stream stays FEATURE
            elif name.endswith("_proj.weight"):
                p.copy_(Normal(g, p.shape, gain / math.sqrt(p.shape[1])))
            elif name not in ("model.embed_tokens.weight", "lm_head.weight"):
                raise ValueError(f"hf_reference: no init for parameter {name}")
        emb = model.model.embed_tokens.weight
        vocab = emb.shape[0]
        e = Normal(g, (vocab, d - 1), 1.0)
        e *= math.sqrt(d - 1) / e.norm(dim=1, keepdim=True)
        emb[:, 0] = FEATURE
        emb[:, 1:] = e
        # Tokens in pairs (a, b); lm_head rows in pairs (r1, r2), both aligned with e[a] + e[b].
        # With an odd vocabulary the last token's row is aligned with it alone.
        tokens, rows = torch.randperm(vocab, generator=g), torch.randperm(vocab, generator=g)
        head = model.lm_head.weight
        head[rows[-1], 1:] = e[tokens[-1]]
        tokens, rows = tokens[:vocab // 2 * 2].view(-1, 2), rows[:vocab // 2 * 2].view(-1, 2)
        pair = e[tokens[:, 0]] + e[tokens[:, 1]]
        w = Normal(g, pair.shape, 1.0)
        w *= switch * d / w.norm(dim=1, keepdim=True)
        norm_w = model.model.norm.weight
        # Logit shift to the middle of the two candidates' coherent parts, in units of x_0.
        shift = (1 - KAPPA / 2) * (d - 1) * norm_w[1:].mean() / (norm_w[0] * FEATURE)
        head[rows[:, 0], 1:] = pair + w
        head[rows[:, 1], 1:] = (1 - KAPPA) * pair - w
        head[:, 0] = -shift


def MakeModel(name, vocab, tiny):
    spec = dict(MODELS[name], **(TINY if tiny else {}))
    cls, switch = getattr(transformers, spec.pop("cls")), spec.pop("switch")
    config = cls.config_class(vocab_size=vocab, tie_word_embeddings=False, bos_token_id=None,
                              eos_token_id=None, pad_token_id=None, **spec)
    config.architectures = [cls.__name__]
    model = cls(config).float()
    InitWeights(model, SEED, switch)
    return model


def SaveCheckpoint(model, out, tokenizer):
    """Writes bf16 safetensors, config.json (with the pre-v5 rope keys) and the tokenizer files."""
    os.makedirs(out, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out)
    path = os.path.join(out, "config.json")
    with open(path) as f:
        config = json.load(f)
    rope = dict(config["rope_parameters"])
    config["rope_theta"] = rope.pop("rope_theta")
    if rope["rope_type"] != "default":
        config["rope_scaling"] = rope
    with open(path, "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    for file in ("tokenizer.json", "tokenizer_config.json"):
        src = os.path.join(os.path.dirname(tokenizer), file)
        if file == "tokenizer.json" or os.path.exists(src):
            shutil.copyfile(tokenizer if file == "tokenizer.json" else src,
                            os.path.join(out, file))


def Prompts(tokenizer, n, max_len):
    """n prompts of token ids, lengths geometric from MIN_PROMPT to max_len, each starting at a
    different paragraph of reference_texts.txt (read cyclically)."""
    with open(os.path.join(HERE, "reference_texts.txt")) as f:
        paragraphs = [p.strip() for p in f.read().split("\n\n") if p.strip()]
    tok = Tokenizer.from_file(tokenizer)
    prompts = []
    for i in range(n):
        length = round(MIN_PROMPT * (max_len / MIN_PROMPT) ** (i / max(n - 1, 1)))
        ids, k = [], i
        while len(ids) < length:
            ids += tok.encode(paragraphs[k % len(paragraphs)] + "\n\n",
                              add_special_tokens=False).ids
            k += 1
        prompts.append(ids[:length])
    return prompts


@torch.inference_mode()
def Greedy(model, prompt, max_tokens, device):
    """Exactly max_tokens greedy tokens after prompt (argmax; ties go to the lowest id)."""
    ids = torch.tensor([prompt], device=device)
    out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
    tokens = []
    for _ in range(max_tokens):
        next_id = out.logits[0, -1].float().argmax()
        tokens.append(int(next_id))
        if len(tokens) == max_tokens:
            break
        out = model(input_ids=next_id.view(1, 1), past_key_values=out.past_key_values,
                    use_cache=True)
    return tokens


@torch.inference_mode()
def TeacherForcedTop1(model, prompt, continuation, device):
    """argmax at positions len(prompt)-1 .. len(prompt)+len(continuation)-2 of
    prompt + continuation."""
    ids = torch.tensor([prompt + continuation[:-1]], device=device)
    logits = model(input_ids=ids, use_cache=False, logits_to_keep=len(continuation)).logits[0]
    return logits.float().argmax(dim=-1).tolist()


@torch.inference_mode()
def Beams(model, prompt, width, max_tokens, device):
    """transformers' beam search: `width` sequences of exactly max_tokens tokens, best first
    (the checkpoint has no EOS, so no hypothesis closes early; length penalty 1)."""
    ids = torch.tensor([prompt], device=device)
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         num_beams=width, num_return_sequences=width, max_new_tokens=max_tokens,
                         length_penalty=1.0, early_stopping=False, pad_token_id=0)
    return [row[len(prompt):].tolist() for row in out]


def BeamDoc(model, prompts, args):
    return {"width": args.beam_width, "max_tokens": args.beam_tokens,
            "beams": [Beams(model, p, args.beam_width, args.beam_tokens, args.device)
                      for p in prompts[:args.beam_prompts]]}


def Load(path, dtype, device):
    return transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=getattr(torch, dtype)).to(device).eval()


def WriteJson(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--max-prompt-tokens", type=int, default=1500)
    ap.add_argument("--check-dtype", choices=["bfloat16", "float32"],
                    help="also write hf_<dtype>.json from transformers in this dtype")
    ap.add_argument("--tiny", action="store_true", help="tiny layers (a smoke test of this code)")
    ap.add_argument("--beam-prompts", type=int, default=8,
                    help="beam search on the first N prompts (0: none)")
    ap.add_argument("--beam-width", type=int, default=2,
                    help="2: each beam's two strong successors decide (see Weights)")
    ap.add_argument("--beam-tokens", type=int, default=16)
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("hf_reference: --device cuda but torch sees no CUDA device")
    if args.max_tokens < 1 or args.prompts < 1 or args.max_prompt_tokens < MIN_PROMPT:
        sys.exit("hf_reference: --prompts and --max-tokens must be >= 1, "
                 f"--max-prompt-tokens >= {MIN_PROMPT}")
    torch.set_grad_enabled(False)
    # fp32 accumulation in bf16 GEMMs (cuBLAS may otherwise reduce split-K partials in bf16).
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    transformers.utils.logging.disable_progress_bar()
    vocab = Tokenizer.from_file(args.tokenizer).get_vocab_size(with_added_tokens=True)
    prompts = Prompts(args.tokenizer, args.prompts, args.max_prompt_tokens)
    for name in MODELS:
        t0 = time.time()
        out = os.path.join(args.out, name)
        SaveCheckpoint(MakeModel(name, vocab, args.tiny), out, args.tokenizer)
        model = Load(out, args.dtype, args.device)
        greedy = [Greedy(model, p, args.max_tokens, args.device) for p in prompts]
        ref = {"model": name, "prompts": prompts, "greedy": greedy,
               "max_tokens": args.max_tokens, "dtype": args.dtype, "device": args.device}
        if args.beam_prompts > 0:
            ref["beam"] = BeamDoc(model, prompts, args)
        WriteJson(os.path.join(out, "ref.json"), ref)
        t1 = time.time()
        print(f"hf_reference: {name}: {len(prompts)} prompts "
              f"({sum(map(len, prompts))} tokens) in {args.dtype} on {args.device}, "
              f"{t1 - t0:.1f} s", flush=True)
        if args.check_dtype:
            del model
            model = Load(out, args.check_dtype, args.device)
            doc = {"greedy": [Greedy(model, p, args.max_tokens, args.device) for p in prompts],
                   "teacher_forced_top1": [TeacherForcedTop1(model, p, g, args.device)
                                           for p, g in zip(prompts, greedy)]}
            if args.beam_prompts > 0:
                doc["beams"] = BeamDoc(model, prompts, args)["beams"]
            WriteJson(os.path.join(out, f"hf_{args.check_dtype}.json"), doc)
            print(f"hf_reference: {name}: {args.check_dtype} check in {time.time() - t1:.1f} s",
                  flush=True)
        del model


if __name__ == "__main__":
    main()
