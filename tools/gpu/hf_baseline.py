#!/usr/bin/env python3
"""HF transformers `generate` on the GPU: the baseline for pagellm's serving benchmark.

    hf_baseline.py --lengths BENCH.json [--batch 64] [--max-new-tokens 1024] [--json OUT]

BENCH.json is `pagellm bench --save-detailed --json` output: its first --batch requests'
input_lens and output_lens are the workload. The model is a Llama-3-8B-shaped LlamaForCausalLM
with random bf16 weights made on the GPU (as pagellm's `--load-format dummy`), the prompts random
token ids of those lengths, left-padded into ONE static batch -- how `generate` batches -- with
greedy decoding and every request forced to its own output length (min_new_tokens, as
ignore_eos). The batch runs until its longest request is done; the throughput counts each
request's own tokens only (min(output_len, --max-new-tokens)), as vLLM's paper counts the
baselines. A warm-up generate of 4 tokens runs first. Prints one JSON line; --json writes it.
"""

import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=1024)
    ap.add_argument("--json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true",
                    help="a 2-layer, 256-wide Llama instead (check.sh dry-run, on the CPU)")
    args = ap.parse_args()

    with open(args.lengths) as f:
        bench = json.load(f)
    ins = bench["input_lens"][: args.batch]
    outs = [min(o, args.max_new_tokens) for o in bench["output_lens"][: args.batch]]
    if not ins or len(ins) != len(outs) or min(outs) < 1:
        print("hf_baseline: no usable input_lens/output_lens in", args.lengths, file=sys.stderr)
        return 1

    import torch
    import transformers

    shape = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                 num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8)
    if args.tiny:
        shape = dict(vocab_size=128256, hidden_size=256, intermediate_size=512,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    config = transformers.LlamaConfig(
        **shape, max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0,
        tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001, pad_token_id=0)
    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    torch.manual_seed(0)
    start = time.time()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(args.device):
        model = transformers.LlamaForCausalLM(config)
    model.eval()
    sync()
    load_s = time.time() - start

    gen = torch.Generator(device=args.device).manual_seed(1)
    width = max(ins)
    ids = torch.zeros((len(ins), width), dtype=torch.long, device=args.device)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(ins):  # left padding
        ids[i, width - n:] = torch.randint(1000, 128000, (n,), device=args.device, generator=gen)
        mask[i, width - n:] = 1

    def generate(new_tokens):
        with torch.no_grad():
            return model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                  max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                  pad_token_id=0)

    generate(4)
    sync()
    steps = max(outs)
    start = time.time()
    out = generate(steps)
    sync()
    elapsed = time.time() - start
    if out.shape[1] != width + steps:
        print(f"hf_baseline: generated {out.shape[1] - width} of {steps} tokens", file=sys.stderr)
        return 1
    useful = sum(outs)
    result = {
        "transformers": transformers.__version__, "torch": torch.__version__,
        "batch": len(ins), "padded_prompt_len": width, "steps": steps,
        "useful_output_tokens": useful, "elapsed_s": round(elapsed, 3),
        "output_throughput": round(useful / elapsed, 1),
        "padded_output_throughput": round(len(ins) * steps / elapsed, 1),
        "model_init_s": round(load_s, 1),
    }
    line = json.dumps(result)
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
