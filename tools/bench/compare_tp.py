#!/usr/bin/env python3
"""Tensor parallelism on the CPU against one rank, same machine, same cores, one run (issue 12).

Runs build/bin/pagellm-bench --json once per group size: TP=1 with all THREADS threads, then
TP=N with THREADS / N threads in each of its N rank processes, so every run uses the same cores.
Prints prefill and decode tok/s, the ratio to TP=1, and the milliseconds each decode step spent
in collectives (all-reduces, the step broadcast, the logits gather; waiting for the slowest rank
included). Both OpenBLAS tuning variables are unset for the benchmark's processes.

The default model is the random-weight llama-tiny (8 heads, 4 KV heads, fp32), which 2 and 4
divide; --model/--load-format take any other.

Usage: .venv/bin/python tools/bench/compare_tp.py [--sizes 1,2] [--threads 2] [--json-out F]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = ["env", "-u", "OPENBLAS_CORETYPE", "-u", "OPENBLAS_L2_SIZE"]


def Bench(args, tp):
    model = (["--load-format", "dummy", "--dummy-model", args.dummy_model, "--dummy-dtype",
              args.dummy_dtype, "--tokenizer", args.tokenizer] if not args.model
             else ["--model", args.model])
    cmd = ENV + [os.path.join(ROOT, "build", "bin", "pagellm-bench"), *model,
                 "--tensor-parallel-size", str(tp), "--threads", str(max(1, args.threads // tp)),
                 "--prompt_len", str(args.prompt_len), "--batch", args.batch,
                 "--decode_prompt_len", str(args.decode_prompt_len),
                 "--decode_len", str(args.decode_len), "--repeats", "2", "--json"]
    print("+ " + " ".join(cmd[len(ENV):]), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        sys.exit(f"compare_tp: pagellm-bench at TP={tp} failed (exit {p.returncode})")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,2")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--model", default="")
    ap.add_argument("--dummy-model", default="llama-tiny")
    ap.add_argument("--dummy-dtype", default="f32")
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models",
                                                        "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--batch", default="1,16,64")
    ap.add_argument("--decode-prompt-len", type=int, default=128)
    ap.add_argument("--decode-len", type=int, default=64)
    ap.add_argument("--json-out", default="")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = {tp: Bench(args, tp) for tp in sizes}
    base = runs[sizes[0]]
    rows = [("prefill %d tokens" % args.prompt_len, "prefill_tok_s", None)]
    rows += [("decode batch %s" % b, "decode_tok_s", b) for b in args.batch.split(",")]
    head = "| workload | " + " | ".join(f"TP={tp} tok/s | ratio | collectives ms/step"
                                         for tp in sizes) + " |"
    print(head)
    print("|" + " --- |" * (1 + 3 * len(sizes)))
    for name, key, b in rows:
        cells = []
        for tp in sizes:
            r = runs[tp]
            v = r[key] if b is None else r[key][b]
            ref = base[key] if b is None else base[key][b]
            coll = "" if b is None else "%.2f" % r["decode_collective_ms_per_step"][b]
            cells += ["%.1f" % v, "%.2f" % (v / ref), coll]
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({str(tp): r for tp, r in runs.items()}, f, indent=1)


if __name__ == "__main__":
    main()
