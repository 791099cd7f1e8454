#!/usr/bin/env python3
"""How close quantized inference stays to the exact product of the same weights: pagellm and
llama.cpp on a quantized GGUF against pagellm on that file dequantized to F32 (by the `gguf`
package, tools/convert/gguf_to_f32.py) and run in fp32 -- which matches llama.cpp's F32 run token
for token (tests/fidelity_test.cc). Both quantized engines also quantize activations to int8,
llama.cpp per 256 elements for K-quant weights, pagellm per 32; this measures what that costs.

Per prompt of the fixture (llama.cpp's greedy continuation, made by
tools/fixtures/make_llamacpp_fixture.py on the quantized file): the tokens each continuation
shares with the fp32 one before it leaves it, and their means.

  .venv/bin/python tools/bench/quant_fidelity.py \\
      [--model models/SmolLM2-135M-Instruct.Q4_K_M.gguf] \\
      [--fixture tests/data/fidelity/llamacpp_smollm2_q4_k_m.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def Generate(pagellm, model, text, n):
    cmd = [pagellm, "generate", "--model", model, "--prompt", text, "--max-tokens", str(n),
           "--min-tokens", str(n), "--ignore-eos", "--temperature", "0", "--json",
           "--kv_cache_dtype", "f32", "--threads", "2"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])["token_ids"]


def Prefix(a, b):
    k = 0
    while k < len(a) and k < len(b) and a[k] == b[k]:
        k += 1
    return k


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models",
                                                    "SmolLM2-135M-Instruct.Q4_K_M.gguf"))
    ap.add_argument("--fixture", default=os.path.join(ROOT, "tests", "data", "fidelity",
                                                      "llamacpp_smollm2_q4_k_m.json"))
    ap.add_argument("--pagellm", default=os.path.join(ROOT, "build", "bin", "pagellm"))
    args = ap.parse_args()
    cases = json.load(open(args.fixture))["cases"]
    with tempfile.TemporaryDirectory() as d:
        f32 = os.path.join(d, "dequantized.F32.gguf")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert", "gguf_to_f32.py"),
                        args.model, f32], check=True, stdout=subprocess.DEVNULL)
        rows = []
        for c in cases:
            n = len(c["greedy_ids"])
            exact = Generate(args.pagellm, f32, c["prompt"], n)
            ours = Generate(args.pagellm, args.model, c["prompt"], n)
            rows.append((c["name"], Prefix(ours, exact), Prefix(c["greedy_ids"], exact)))
    print(f"| {'prompt':16s} | pagellm | llama.cpp |")
    print(f"| {'-' * 16} | ------- | --------- |")
    for name, a, b in rows:
        print(f"| {name:16s} | {a:7d} | {b:9d} |")
    print(f"| {'mean':16s} | {statistics.mean(r[1] for r in rows):7.1f} | "
          f"{statistics.mean(r[2] for r in rows):9.1f} |")
    print(f"tokens before each greedy continuation on {os.path.basename(args.model)} leaves the "
          f"fp32 one on its dequantized weights; identical: pagellm "
          f"{sum(r[1] == len(c['greedy_ids']) for r, c in zip(rows, cases))}/{len(rows)}, "
          f"llama.cpp {sum(r[2] == len(c['greedy_ids']) for r, c in zip(rows, cases))}/{len(rows)}")


if __name__ == "__main__":
    main()
