#!/usr/bin/env python3
"""Short requests queued in the router: how soon a finished request's place is refilled.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python tools/bench/refill_bench.py \
        [--bin build/bin] [--bin OTHER/build/bin ...] [--rounds 2]

--requests streamed OpenAI /v1/completions requests arrive at once (~30-token prompts, all
different; --max-tokens output tokens each, greedy, ignore_eos) at one pagellm-worker
(`--threads 1`, the default Q4_1 model, `--max-num-seqs` --max-num-seqs) behind pagellm-router
(polling its worker every 200 ms, the default). The router holds what the worker has no room
for; each time a request ends, the next one should start. Each --bin (a build's bin directory:
compare two builds) runs --rounds times, alternating, fresh processes each run. Reported per
run: wall time, output tokens/s, and time to first token p50 / p90 over the requests. Prints
JSON, then a table.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import compare_routing_vllm as peer  # noqa: E402  pylint: disable=wrong-import-position
import serving_e2e_test as e2e  # noqa: E402  pylint: disable=wrong-import-position


def Prompt(i):
    return (f"Request {i}: in one sentence, say what a {['river', 'bridge', 'forest'][i % 3]} "
            f"numbered {i * 7 + 3} might be famous for, and why people visit it.")


def Run(bin_dir, args):
    e2e.BIN = os.path.abspath(bin_dir)
    procs = []
    try:
        worker = e2e.StartWorker("refill-worker", ["--num-kv-blocks", "2048", "--max-num-seqs",
                                                   str(args.max_num_seqs)])
        procs.append(worker)
        worker.WaitServing(timeout=120)
        router = e2e.StartRouter("refill-router", [worker])
        procs.append(router)
        router.WaitServing()
        port = router.http_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models") as r:
            model = json.load(r)["data"][0]["id"]
        peer.Stream(port, model, "Warm-up.", 2)
        start = time.perf_counter()

        def one(i):
            t = time.perf_counter()
            first, tokens = peer.Stream(port, model, Prompt(i), args.max_tokens)
            return first, tokens, time.perf_counter() - t

        with concurrent.futures.ThreadPoolExecutor(args.requests) as pool:
            results = list(pool.map(one, range(args.requests)))
        wall = time.perf_counter() - start
        ttft = sorted(r[0] for r in results)
        return {"wall_s": round(wall, 2),
                "output_tok_per_s": round(sum(r[1] for r in results) / wall, 1),
                "ttft_p50_s": round(ttft[len(ttft) // 2], 3),
                "ttft_p90_s": round(ttft[int(len(ttft) * 0.9)], 3)}
    finally:
        for p in procs:
            p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--requests", type=int, default=96)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--max-num-seqs", type=int, default=16)
    args = ap.parse_args()
    bins = args.bin or [os.path.join(ROOT, "build", "bin")]
    runs = []
    for r in range(args.rounds):
        for b in bins:
            runs.append({"bin": b, "round": r, **Run(b, args)})
    print(json.dumps({"workload": vars(args), "runs": runs}, indent=1))
    print(f"\n{'bin':<40}{'round':>6}{'wall s':>9}{'out tok/s':>11}{'TTFT p50':>10}{'p90':>8}")
    for x in runs:
        print(f"{x['bin'][-40:]:<40}{x['round']:>6}{x['wall_s']:>9.2f}{x['output_tok_per_s']:>11.1f}"
              f"{x['ttft_p50_s']:>10.3f}{x['ttft_p90_s']:>8.3f}")
    shutil.rmtree(e2e.LOG_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
