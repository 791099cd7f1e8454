#!/usr/bin/env python3
"""More LoRA adapters than slots: a mixed burst of adapter and base-model requests on a server
that holds four adapters and can put one at a time in a batch (vLLM's --max-loras 1
--max-cpu-loras 4), pagellm against vLLM-CPU in one sitting.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python tools/bench/lora_slots_bench.py \
        [--vllm-python /tmp/vllm-venv/bin/python] [--per-adapter 3] [--base 4] \
        [--max-tokens 48] [--rounds 2]

Each server serves the default model on one core (pagellm: one worker, `--threads 1`, the Q4_1
GGUF, behind pagellm-router; vLLM: bf16 on the HF layout, bound to core 0), with runtime LoRA
updating on and `--max-loras 1 --max-cpu-loras 4 --max-lora-rank 8`. Four adapters (the rank-8
test adapter, models/SmolLM2-135M-Instruct-lora-test, under four names) are loaded through
POST /v1/load_lora_adapter. Then, --rounds times, a burst arrives at once: --per-adapter
streamed greedy completions for each adapter and --base for the base model, --max-tokens each
(ignore_eos). Reported per server: the burst's makespan, output tokens per second over it, and
the median and longest time to first token and request latency (each the median over rounds).
Both also run with `--max-loras 4` (every adapter in a slot: no moves), what one slot costs
each measured against it. `--configs SLOTS:HELD,...` picks other settings: `1:2` holds two of the
four adapters in host memory (--max-cpu-loras 2), so each burst reads adapters again from disk
(pagellm off the engine thread, vLLM in its engine step). Prints JSON, then a table.
"""
import argparse
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
import lora_load_bench as load_bench  # noqa: E402  pylint: disable=wrong-import-position

ADAPTER_DIR = load_bench.ADAPTER_DIR
ADAPTERS = [f"tenant-{i}" for i in range(4)]


def Load(port, name, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/load_lora_adapter",
                 json.dumps({"lora_name": name, "lora_path": path}),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    if resp.status != 200:
        raise RuntimeError(f"load {name}: HTTP {resp.status}: {text[:200]}")


def Burst(port, base_model, args):
    """One burst: {makespan_s, tokens, ttft_s: [...], latency_s: [...]}."""
    jobs = [(a, f"Tenant {a} asks, request {i}: describe a harbour at dawn.")
            for i in range(args.per_adapter) for a in ADAPTERS]
    jobs += [(base_model, f"Base request {i}: describe a mountain village.")
             for i in range(args.base)]
    results = [None] * len(jobs)
    start = time.perf_counter()

    def Run(k, model, prompt):
        t0 = time.perf_counter()
        first, tokens = peer.Stream(port, model, prompt, args.max_tokens)
        results[k] = (first, time.perf_counter() - t0, tokens)

    threads = [threading.Thread(target=Run, args=(k, m, p)) for k, (m, p) in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    makespan = time.perf_counter() - start
    if any(r is None or r[2] != args.max_tokens for r in results):
        raise RuntimeError(f"a request came back short: {results}")
    return {"makespan_s": makespan, "tokens": sum(r[2] for r in results),
            "ttft_s": [r[0] for r in results], "latency_s": [r[1] for r in results]}


def Summarize(bursts):
    med = lambda key: statistics.median(key(b) for b in bursts)  # noqa: E731
    return {
        "makespan_s": med(lambda b: b["makespan_s"]),
        "tokens_per_s": med(lambda b: b["tokens"] / b["makespan_s"]),
        "ttft_median_ms": 1e3 * med(lambda b: statistics.median(b["ttft_s"])),
        "ttft_max_ms": 1e3 * med(lambda b: max(b["ttft_s"])),
        "latency_median_ms": 1e3 * med(lambda b: statistics.median(b["latency_s"])),
        "latency_max_ms": 1e3 * med(lambda b: max(b["latency_s"])),
    }


def Measure(port, base_model, lora_path, args):
    for name in ADAPTERS:
        Load(port, name, lora_path)
    Burst(port, base_model, argparse.Namespace(per_adapter=1, base=1, max_tokens=4))  # warm-up
    return Summarize([Burst(port, base_model, args) for _ in range(args.rounds)])


def RunPagellm(args, slots, held):
    flags = ("--max-loras", str(slots), "--max-cpu-loras", str(held), "--max-lora-rank", "8")
    with load_bench.PagellmServer(f"lora-slots-{slots}-{held}", flags) as (port, model, worker):
        result = Measure(port, model, os.path.basename(ADAPTER_DIR), args)
        result["slot_loads"] = worker.Metric("pagellm_lora_slot_loads_total")
        result["adapter_reads"] = worker.Metric("pagellm_lora_adapter_reads_total")
        return result


def RunVllm(args, slots, held):
    os.environ["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    extra = ("--enable-lora", "--max-loras", str(slots), "--max-cpu-loras", str(held),
             "--max-lora-rank", "8")
    with peer.VllmServer(args.vllm_python, f"lora-slots-vllm-{slots}-{held}.log", extra) as port:
        return Measure(port, "smollm2", ADAPTER_DIR, args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-python", default="/tmp/vllm-venv/bin/python")
    ap.add_argument("--per-adapter", type=int, default=3)
    ap.add_argument("--base", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip-vllm", action="store_true")
    ap.add_argument("--configs", default="1:4,4:4",
                    help="SLOTS:HELD,... (--max-loras:--max-cpu-loras) for both servers")
    args = ap.parse_args()
    configs = [tuple(int(x) for x in c.split(":")) for c in args.configs.split(",")]
    with_vllm = os.path.exists(args.vllm_python) and not args.skip_vllm
    results = {}
    for slots, held in configs:
        what = f"{slots} slot{'s' if slots > 1 else ''}, {held} held"
        results[f"pagellm ({what})"] = RunPagellm(args, slots, held)
        if with_vllm:
            results[f"vllm ({what})"] = RunVllm(args, slots, held)
    print(json.dumps(results, indent=2))
    keys = ["makespan_s", "tokens_per_s", "ttft_median_ms", "ttft_max_ms", "latency_median_ms",
            "latency_max_ms"]
    print("| server | " + " | ".join(keys) + " |")
    print("| --- " * (len(keys) + 1) + "|")
    for server, r in results.items():
        print(f"| {server} | " + " | ".join(f"{r[k]:.2f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
