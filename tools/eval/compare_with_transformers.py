#!/usr/bin/env python3
"""Checks lm-evaluation-harness' answers from pagellm against HF transformers in fp32.

lm-eval's `local-completions` model scores each (context, continuation) with one completions
request (echo, logprobs 1, max_tokens 1) and reads the continuation's summed logprob and whether
greedy decoding would produce it. This recomputes both with transformers on the HF layout of the
same weights and prints the largest difference.

Recipe, from the repository root (lm-eval in a venv of its own: pip install "lm-eval[api]"
transformers; it downloads nothing for this task):
  tools/serve.sh models/SmolLM2-135M-Instruct.F32.gguf &
  LMEVAL/bin/lm_eval --model local-completions --model_args \\
      model=SmolLM2-135M-Instruct.F32.gguf,base_url=http://127.0.0.1:8000/v1/completions,\\
tokenizer_backend=huggingface,tokenizer=models/SmolLM2-135M-Instruct-hf,num_concurrent=4 \\
      --tasks pagellm_mc --include_path tools/eval --log_samples --output_path /tmp/lm_eval
  PYTHON tools/eval/compare_with_transformers.py /tmp/lm_eval/*/samples_pagellm_mc_*.jsonl
where PYTHON has torch and transformers (the vLLM venv of ../shared/PEERS.md has both).
"""
import argparse
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("samples", help="lm-eval's samples_*.jsonl (--log_samples)")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct-hf"))
    args = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    worst, n, agree = 0.0, 0, 0
    with open(args.samples) as f:
        for line in f:
            s = json.loads(line)
            for key, arg in s["arguments"].items():
                ctx, cont = arg["arg_0"], arg["arg_1"]
                # lm-eval's split: the context's tokens, then the rest of the whole string's.
                whole = tok(ctx + cont, add_special_tokens=False)["input_ids"]
                nctx = len(tok(ctx, add_special_tokens=False)["input_ids"])
                with torch.no_grad():
                    lp = torch.log_softmax(model(torch.tensor([whole])).logits[0].double(), -1)
                ll = sum(float(lp[i - 1, whole[i]]) for i in range(nctx, len(whole)))
                greedy = all(int(lp[i - 1].argmax()) == whole[i] for i in range(nctx, len(whole)))
                got_ll, got_greedy = s["resps"][int(key.split("_")[-1])][0]
                worst = max(worst, abs(ll - float(got_ll)))
                agree += str(greedy) == got_greedy
                n += 1
    print(f"{n} loglikelihood requests: max |pagellm - transformers fp32| = {worst:.2e}; "
          f"is_greedy agrees {agree}/{n}")
    return 0 if n > 0 and worst < 1e-3 and agree == n else 1


if __name__ == "__main__":
    raise SystemExit(main())
