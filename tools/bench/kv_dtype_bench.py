#!/usr/bin/env python3
"""The KV cache's element type, f16 against 8-bit floats (--kv-cache-dtype fp8_e4m3, fp8_e5m2),
in one run on the same machine: `pagellm generate --stats` (greedy, ignore_eos, all prompts
batched), output tokens per second of the whole run (prefill included), preemptions, and the
blocks the pool held.

Workloads:
  pressure  64 prompts of ~115 tokens, 128 out each, in --kv-cache-memory 0.2 GiB: an f16 pool
            holds ~9,000 tokens, less than the batch's 15,500, so it preempts; fp8 holds twice.
  roomy     the same in 1 GiB: what reading 8-bit elements costs when memory is not short.
  long      8 prompts of ~1,900 tokens, 128 out each, in 1 GiB: decode steps that read long
            contexts.
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for the runs (a benchmark's numbers must not
depend on the test machines' tuning).

Usage: .venv/bin/python tools/bench/kv_dtype_bench.py [--model M] [--threads 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = ["env", "-u", "OPENBLAS_CORETYPE", "-u", "OPENBLAS_L2_SIZE"]
WORDS = ("river mountain engine library quantum harvest lantern orchestra compass glacier "
         "meadow circuit falcon theorem canyon violin harbor nebula parchment ember").split()


def Prompts(n, words, salt):
    out = []
    for i in range(n):
        s = [WORDS[(i * 7 + j * 3 + salt) % len(WORDS)] for j in range(words)]
        out.append(f"Request {i}: " + " ".join(s))
    return out


def Run(args, prompts, max_tokens, memory, dtype):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(prompts) + "\n")
        path = f.name
    cmd = ENV + [os.path.join(ROOT, "build", "bin", "pagellm"), "generate", "--model", args.model,
                 "--prompts-file", path, "--max-tokens", str(max_tokens), "--temperature", "0",
                 "--ignore-eos", "--json", "--stats", "--threads", str(args.threads),
                 "--kv-cache-memory", str(memory), "--kv-cache-dtype", dtype,
                 "--swap-space", "0", "--max-num-batched-tokens", "512"]
    print("+ " + " ".join(cmd[len(ENV):]), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    os.unlink(path)
    if p.returncode != 0:
        sys.exit(p.stderr[-3000:])
    stats = json.loads(p.stderr.strip().splitlines()[-1])
    completions = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    tokens = sum(len(c["token_ids"]) for c in completions)
    return {"tok_s": tokens / stats["elapsed_s"], "preemptions": sum(stats["preemptions"].values()),
            "blocks": stats["num_kv_blocks"], "peak_blocks": stats["peak_used_blocks"],
            "tokens": [c["token_ids"] for c in completions]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models",
                                                     "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtypes", default="f16,fp8_e4m3,fp8_e5m2")
    args = ap.parse_args()
    workloads = [("pressure", Prompts(64, 100, 1), 128, 0.2),
                 ("roomy", Prompts(64, 100, 1), 128, 1.0),
                 ("long", Prompts(8, 1700, 2), 128, 1.0)]
    rows = []
    for name, prompts, out, memory in workloads:
        base = None
        for dtype in args.dtypes.split(","):
            r = Run(args, prompts, out, memory, dtype)
            if base is None:
                base = r
            same = sum(a == b for a, b in zip(r["tokens"], base["tokens"]))
            rows.append((name, dtype, r["tok_s"], r["tok_s"] / base["tok_s"], r["preemptions"],
                         r["blocks"], r["peak_blocks"], f"{same}/{len(prompts)}"))
    print("| workload | KV dtype | output tok/s | vs f16 | preemptions | pool blocks | peak used "
          "| continuations equal to f16's |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for w, d, t, ratio, pre, blocks, peak, same in rows:
        print(f"| {w} | {d} | {t:.1f} | {ratio:.2f}x | {pre} | {blocks} | {peak} | {same} |")


if __name__ == "__main__":
    main()
