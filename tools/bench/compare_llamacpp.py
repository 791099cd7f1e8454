#!/usr/bin/env python3
"""Runs pagellm's benchmark and its llama.cpp peers in one go and prints a table with ratios.

llama.cpp side (built by tools/bench/build_llamacpp.sh):
  llama-bench -p PROMPT_LEN -n DECODE_LEN -t THREADS         -> prefill t/s, decode t/s at b=1
  llama-batched-bench -npp 128 -ntg DECODE_LEN -npl BATCHES  -> decode (S_TG) t/s per batch
pagellm side: build/bin/pagellm-bench --model M --threads T --prompt-len P --decode-len D
  --batch B1,B2,.. --json, printing one JSON object
  {"prefill_tok_s": x, "decode_tok_s": {"1": y, ...}}.
If that binary is absent only the llama.cpp side is printed.

Usage: .venv/bin/python tools/bench/compare_llamacpp.py [--model M] [--threads 2] [--json-out F]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Both sides run without the OpenBLAS tuning variables: these machines set them for tests, and a
# benchmark's numbers must not depend on them.
PEER_ENV = ["env", "-u", "OPENBLAS_CORETYPE", "-u", "OPENBLAS_L2_SIZE"]


def Run(cmd):
    """Runs cmd, echoing it to stderr; returns stdout. Exits with the tool's stderr on failure."""
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        sys.exit(f"compare: {cmd[len(PEER_ENV) if cmd[0] == 'env' else 0]} failed "
                 f"(exit {p.returncode})")
    return p.stdout


def LlamaBench(binary, args):
    """Returns {"prefill": t/s for pp PROMPT_LEN, "decode": t/s for tg DECODE_LEN}."""
    out = Run(PEER_ENV + [binary, "-m", args.model, "-t", str(args.threads),
                          "-p", str(args.prompt_len), "-n", str(args.decode_len),
                          "-r", str(args.reps), "-o", "json"])
    result = {}
    for row in json.loads(out):
        if row["n_prompt"] > 0 and row["n_gen"] == 0:
            result["prefill"] = row["avg_ts"]
        elif row["n_gen"] > 0 and row["n_prompt"] == 0:
            result["decode"] = row["avg_ts"]
    return result


def BatchedBench(binary, args, batches):
    """Returns {batch size: decode (S_TG) t/s} from llama-batched-bench's jsonl output."""
    npp, ntg = args.batched_prompt_len, args.decode_len
    n_ctx = max(b * (npp + ntg) for b in batches)
    out = Run(PEER_ENV + [binary, "-m", args.model, "-t", str(args.threads),
                          "-tb", str(args.threads), "-c", str(n_ctx), "-b", "2048",
                          "-ub", "512", "-npp", str(npp), "-ntg", str(ntg),
                          "-npl", ",".join(map(str, batches)), "--output-format", "jsonl"])
    result = {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            row = json.loads(line)
            result[int(row["pl"])] = row["speed_tg"]
    return result


def PagellmBench(binary, args, batches):
    """Returns pagellm-bench's JSON object with decode_tok_s keyed by int batch size."""
    out = Run(PEER_ENV + [binary, "--model", args.model, "--threads", str(args.threads),
                          "--prompt-len", str(args.prompt_len), "--decode-len",
                          str(args.decode_len), "--batch", ",".join(map(str, batches)), "--json"])
    start = out.find("{")
    doc = json.loads(out[start:out.rfind("}") + 1])
    doc["decode_tok_s"] = {int(k): v for k, v in doc.get("decode_tok_s", {}).items()}
    return doc


def Fmt(x):
    return f"{'-':>10s}" if x is None else f"{x:10.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models",
                                                    "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--decode-len", type=int, default=128)
    ap.add_argument("--batched-prompt-len", type=int, default=128,
                    help="prompt length per sequence in llama-batched-bench")
    ap.add_argument("--batch", default="1,32,64")
    ap.add_argument("--reps", type=int, default=5, help="llama-bench repetitions")
    ap.add_argument("--llamacpp-bin", default=os.path.join(ROOT, "build-llamacpp", "bin"))
    ap.add_argument("--pagellm-bench", default=os.path.join(ROOT, "build", "bin",
                                                            "pagellm-bench"))
    ap.add_argument("--json-out", help="also write all numbers to this file")
    args = ap.parse_args()
    batches = [int(b) for b in args.batch.split(",")]

    for tool in ("llama-bench", "llama-batched-bench"):
        if not os.access(os.path.join(args.llamacpp_bin, tool), os.X_OK):
            sys.exit(f"compare: {args.llamacpp_bin}/{tool} missing; "
                     "run tools/bench/build_llamacpp.sh")
    if not os.path.exists(args.model):
        sys.exit(f"compare: model {args.model} missing; run tools/fetch_model.sh")

    # Other jobs on the same cores distort these numbers a lot (ggml's threads spin-wait), so
    # the load is read before anything runs (the benchmarks themselves load both cores).
    load = os.getloadavg()[0]
    pagellm = None
    if os.access(args.pagellm_bench, os.X_OK):
        pagellm = PagellmBench(args.pagellm_bench, args, batches)
    else:
        print(f"compare: {args.pagellm_bench} not built; showing the llama.cpp side only",
              file=sys.stderr)
    single = LlamaBench(os.path.join(args.llamacpp_bin, "llama-bench"), args)
    batched = BatchedBench(os.path.join(args.llamacpp_bin, "llama-batched-bench"), args,
                           batches)

    rows = [(f"prefill pp{args.prompt_len} (tok/s)", single.get("prefill"),
             pagellm and pagellm.get("prefill_tok_s"))]
    rows.append((f"decode tg{args.decode_len} b=1, llama-bench (tok/s)", single.get("decode"),
                 pagellm and pagellm["decode_tok_s"].get(1)))
    for b in batches:
        rows.append((f"decode b={b}, batched-bench npp{args.batched_prompt_len} (tok/s)",
                     batched.get(b), pagellm and pagellm["decode_tok_s"].get(b)))

    print(f"model {os.path.basename(args.model)}, {args.threads} threads, load average before "
          f"the run {load:.2f}"
          f"{'  (WARNING: busy machine, numbers unreliable)' if load > 1.0 else ''}")
    print(f"| {'metric':50s} | {'llama.cpp':>10s} | {'pagellm':>10s} | {'ratio':>6s} |")
    print(f"|{'-' * 52}|{'-' * 12}|{'-' * 12}|{'-' * 8}|")
    for name, peer, ours in rows:
        ratio = f"{ours / peer:6.2f}" if peer and ours else "     -"
        print(f"| {name:50s} | {Fmt(peer)} | {Fmt(ours)} | {ratio} |")
    print("ratio = pagellm / llama.cpp (higher is better for pagellm)")

    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"model": os.path.basename(args.model), "threads": args.threads,
                       "llamacpp": {"llama_bench": single,
                                    "batched_bench_decode_tok_s": batched},
                       "pagellm": pagellm}, f, indent=1)


if __name__ == "__main__":
    main()
