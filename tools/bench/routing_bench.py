#!/usr/bin/env python3
"""Cache-aware routing against placement by free KV blocks, on real workers behind one router.

    .venv/bin/python tools/bench/routing_bench.py [--workers 2] [--tenants 8] \
        [--requests-per-tenant 8] [--concurrency 8] [--policies prefix-aware,most-free-blocks]

The workload is a multi-tenant chat service: each tenant has a long instruction prefix of its
own (~410 tokens) and every request is that prefix plus a short question (~15 tokens), greedy,
16 output tokens. Requests come in a seeded random order from `--concurrency` closed-loop
clients through the router's gRPC API. For each policy it starts fresh workers (`--threads 1`
each, so that two of them share this 2-core machine fairly) and a router with
`--routing-policy POLICY`, runs the same request sequence, and reports:
  * wall time, requests/s and output tokens/s;
  * time to first token (client-side) p50, p90 and mean;
  * the workers' prefix-cache hit rate (pagellm_prefix_cache_hit_tokens_total over
    pagellm_prefix_cache_queried_tokens_total) and the prompt tokens they computed;
  * the router's expectation (pagellm_router_placed_prompt_tokens_total{expected="cached"}).
The floor: one worker holding every prefix computes each tenant's prefix once, so the best hit
rate is (requests - tenants) * prefix blocks / all prompt tokens. Prints one JSON object, then a
table with each policy's ratio to the last one named.
Run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (benchmarks do).
"""
import argparse
import concurrent.futures
import json
import os
import random
import shutil
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
# The end-to-end tests' process harness: workers and a router on free loopback ports.
import serving_e2e_test as e2e  # noqa: E402  pylint: disable=wrong-import-position

WORDS = ["kind", "brief", "exact", "polite", "calm", "clear", "plain", "fair", "honest", "formal"]


def Workload(args):
    rng = random.Random(args.seed)
    tenants = [f"You are the assistant of tenant {t}. " + " ".join(
        f"Rule {t}.{i}: always be {WORDS[(i * 7 + t) % len(WORDS)]} with customers of team {t}."
        for i in range(args.prefix_rules)) for t in range(args.tenants)]
    requests = [(t, f"{tenants[t]}\nQuestion {q}: what is {q * 13 + t} times {q + 2}?")
                for t in range(args.tenants) for q in range(args.requests_per_tenant)]
    rng.shuffle(requests)
    return requests


def RunPolicy(args, policy, requests):
    workers, router = [], None
    try:
        workers = [e2e.StartWorker(f"{policy}-worker{i}",
                                   ["--num-kv-blocks", str(args.num_kv_blocks)])
                   for i in range(args.workers)]
        for w in workers:
            w.WaitServing(timeout=120)
        router = e2e.StartRouter(f"{policy}-router", workers, ["--routing-policy", policy])
        router.WaitServing()
        stub = e2e.GEN_GRPC.GenerationStub(e2e.Channel(router.target))
        prefix_tokens = len(stub.Tokenize(e2e.GEN_PB2.TokenizeRequest(
            text=Workload(args)[0][1].split("\nQuestion")[0]), timeout=30).token_ids)
        # Warm-up: one request that shares nothing with the workload, on each worker.
        for i in range(args.workers):
            e2e.pagellm_client.Generate(stub, e2e.GEN_PB2, prompt=f"Warm-up {i}.", max_tokens=2,
                                    temperature=0)

        def one(request):
            _, text = request
            req = e2e.GEN_PB2.GenerateRequest(text=text)
            req.sampling.max_tokens, req.sampling.ignore_eos = args.max_tokens, True
            req.sampling.temperature = 0
            start = time.perf_counter()
            first, tokens, prompt = None, 0, 0
            for msg in stub.Generate(req, timeout=600):
                for d in msg.deltas:
                    if first is None and d.token_ids:
                        first = time.perf_counter() - start
                    tokens += len(d.token_ids)
                if msg.HasField("usage"):
                    prompt = msg.usage.prompt_tokens
            return first, tokens, prompt

        def metric_sum(name):
            return sum(w.Metric(name) for w in workers)

        hit0 = metric_sum("pagellm_prefix_cache_hit_tokens_total")
        queried0 = metric_sum("pagellm_prefix_cache_queried_tokens_total")
        computed0 = metric_sum("pagellm_prompt_tokens_total")
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
            results = list(pool.map(one, requests))
        wall = time.perf_counter() - start
        time.sleep(0.5)  # metrics follow each step
        ttft = sorted(r[0] for r in results)
        out_tokens = sum(r[1] for r in results)
        prompt_tokens = sum(r[2] for r in results)
        hit = metric_sum("pagellm_prefix_cache_hit_tokens_total") - hit0
        queried = metric_sum("pagellm_prefix_cache_queried_tokens_total") - queried0
        return {
            "policy": policy,
            "wall_s": round(wall, 2),
            "requests_per_s": round(len(requests) / wall, 3),
            "output_tok_per_s": round(out_tokens / wall, 1),
            "ttft_p50_s": round(ttft[len(ttft) // 2], 3),
            "ttft_p90_s": round(ttft[int(len(ttft) * 0.9)], 3),
            "ttft_mean_s": round(statistics.mean(ttft), 3),
            "prompt_tokens": prompt_tokens,
            "computed_prompt_tokens": int(metric_sum("pagellm_prompt_tokens_total") - computed0),
            "hit_rate": round(hit / queried, 4) if queried else 0.0,
            "router_expected_hit_rate": round(
                router.Metric("pagellm_router_placed_prompt_tokens_total", 'expected="cached"') /
                max(1.0, router.Metric("pagellm_router_placed_prompt_tokens_total",
                                       'expected="all"')), 4),
            "prefix_tokens": prefix_tokens,
        }
    finally:
        for p in [router, *workers]:
            if p is not None:
                p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--num-kv-blocks", type=int, default=1024)
    ap.add_argument("--tenants", type=int, default=8)
    ap.add_argument("--requests-per-tenant", type=int, default=8)
    ap.add_argument("--prefix-rules", type=int, default=24, help="~17 tokens each")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--policies", default="prefix-aware,most-free-blocks",
                    help="comma-separated; ratios are against the last")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    requests = Workload(args)
    results = []
    for policy in args.policies.split(","):
        results.append(RunPolicy(args, policy, requests))
    prefix_blocks = (results[0]["prefix_tokens"] - 1) // 16
    best = ((len(requests) - args.tenants) * prefix_blocks * 16) / max(1, results[0]["prompt_tokens"])
    print(json.dumps({"workload": {k: getattr(args, k) for k in (
        "workers", "tenants", "requests_per_tenant", "max_tokens",
        "concurrency", "seed")}, "best_hit_rate": round(best, 4), "results": results}, indent=1))
    base = results[-1]
    print(f"\n{'policy':<18}{'req/s':>8}{'ratio':>7}{'TTFT p50':>10}{'p90':>8}{'hit rate':>10}"
          f"{'computed':>10}")
    for r in results:
        print(f"{r['policy']:<18}{r['requests_per_s']:>8.3f}"
              f"{r['requests_per_s'] / base['requests_per_s']:>6.2f}x{r['ttft_p50_s']:>10.3f}"
              f"{r['ttft_p90_s']:>8.3f}{r['hit_rate']:>10.3f}{r['computed_prompt_tokens']:>10}")
    print(f"best possible hit rate (each prefix computed once): {best:.3f}")
    shutil.rmtree(e2e.LOG_DIR, ignore_errors=True)  # kept only when something failed


if __name__ == "__main__":
    main()
