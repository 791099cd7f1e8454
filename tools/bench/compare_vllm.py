#!/usr/bin/env python3
"""pagellm against vLLM's CPU backend on the same prompts, in one run: output tok/s and ratios.

Workloads (issue 11): 64 x (~115 prompt tokens, 128 out), 64 x (~13, 256), 1 x (114, 256);
greedy, ignore_eos, every request forced to its output length (min = max tokens). Scoring
workloads, named sNxL (e.g. s64x512; not in "all"): N prompts of ~L tokens with prompt logprobs
(1 top logprob) and 1 output token, as lm-evaluation-harness scores prompts: prompt tokens/s. Structured-output
workloads, named jNxO (e.g. j64x160; not in "all"): N chat prompts asking for a person as JSON,
constrained to JSON_SCHEMA below (pagellm --json-schema; vLLM structured_outputs json, its
xgrammar backend), greedy, at most O tokens, ending when the JSON is complete: output tok/s,
requests/s and how many replies are complete and valid (jsonschema). rNxO and gNxO likewise
with N chat prompts asking for contact details, constrained to CONTACT_REGEX (pagellm --regex;
vLLM structured_outputs regex) or to CONTACT_GBNF, the same language as a GBNF grammar
(pagellm --grammar; vLLM structured_outputs grammar); valid: re.fullmatch. Each engine
Edit workloads, eNxO (e.g. e1x256): N chat prompts asking
for a paragraph of reference_texts.txt back with its spelling corrected (the output mostly copies
the prompt: what n-gram speculation is for), greedy, O tokens forced as above. With
--speculative-config JSON (vLLM's spelling, e.g. '{"method": "ngram", "num_speculative_tokens":
5, "prompt_lookup_max": 3, "prompt_lookup_min": 1}') both engines speculate: pagellm
--speculative-config, vLLM LLM(speculative_config=...). Each engine
runs each workload --repeats times (default 2, as the issue's figures: best of two) and the best
run counts; vLLM's first large batch also pays its warm-up of new batch shapes.

Prompts: paragraphs of tools/gpu/reference_texts.txt (read cyclically, a different start per
request), tokenized with the model's tokenizer.json (HF `tokenizers`), cut to the length and
decoded back to text; the same text goes to both engines, which tokenize it themselves (the
counts in the table are pagellm's).

pagellm: `build/bin/pagellm generate --prompts-file F --max-tokens N --min-tokens N --ignore-eos
  --temperature 0 --threads T --stats` (output tok/s = generated_tokens / elapsed_s of its
  generation loop, model load excluded), on --pagellm-model (default: the Q4_1 GGUF) with
  --pagellm-dtype (default auto; the bf16 path: --pagellm-model models/SmolLM2-135M-Instruct.F32.gguf
  --pagellm-dtype bfloat16).
vLLM: `LLM(model=--vllm-model, dtype="bfloat16")` (the HF layout made from the GGUF by
  tools/prepare_models.sh), `llm.generate` timed around the call; vLLM is a peer, never a
  dependency: run this with the venv ../shared/PEERS.md describes (--vllm-python), e.g.
  /tmp/vllm-venv/bin/python. The environment it needs (VLLM_CPU_KVCACHE_SPACE,
  VLLM_CPU_OMP_THREADS_BIND, VLLM_CPU_NUM_OF_RESERVED_CPU, LD_PRELOAD of the venv's
  libiomp5.so) is set for its child only; both OpenBLAS variables are unset for both engines.

Usage: python3 tools/bench/compare_vllm.py --vllm-python /tmp/vllm-venv/bin/python
           [--threads 2] [--repeats 2]
           [--workloads all|64x115x128,64x13x256,1x114x256,s64x512,j64x160,r64x80,g64x80,e1x256]
           [--speculative-config JSON] [--lora PEFT_DIR] [--json-out F]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOADS = [(64, 115, 128), (64, 13, 256), (1, 114, 256)]

VLLM_CHILD = r'''
import json, sys, time
def main():
    cfg = json.load(open(sys.argv[1]))
    from vllm import LLM, SamplingParams
    lora, kw = None, {}
    if cfg["lora"]:
        from vllm.lora.request import LoRARequest
        lora = LoRARequest("test-lora", 1, cfg["lora"])
        kw = {"enable_lora": True, "max_loras": 1, "max_lora_rank": cfg["lora_rank"]}
    llm = LLM(model=cfg["model"], dtype="bfloat16", gpu_memory_utilization=0.3,
              max_model_len=1024, seed=0, speculative_config=cfg["speculative_config"], **kw)
    out = []
    for w in cfg["workloads"]:
        if w.get("constraint"):
            from vllm.sampling_params import StructuredOutputsParams
            kind, value = w["constraint"]
            sp = SamplingParams(temperature=0.0, max_tokens=w["out"],
                                structured_outputs=StructuredOutputsParams(**{kind: value}))
        else:
            sp = SamplingParams(temperature=0.0, max_tokens=w["out"], min_tokens=w["out"],
                                ignore_eos=True, prompt_logprobs=1 if w["score"] else None)
        llm.generate(w["prompts"][:1], SamplingParams(max_tokens=4), lora_request=lora)  # warm-up
        runs = []
        for _ in range(cfg["repeats"]):
            t0 = time.perf_counter()
            res = llm.generate(w["prompts"], sp, use_tqdm=False, lora_request=lora)
            dt = time.perf_counter() - t0
            toks = sum(len(r.prompt_token_ids) if w["score"] else len(r.outputs[0].token_ids)
                       for r in res)
            runs.append({"tokens": toks, "elapsed_s": dt,
                         "texts": [r.outputs[0].text for r in res] if w.get("constraint") else []})
        out.append(max(runs, key=lambda r: r["tokens"] / r["elapsed_s"]))
    print("VLLM_RESULT " + json.dumps(out), flush=True)
if __name__ == "__main__":
    main()
'''


JSON_SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 32},
    "age": {"type": "integer"},
    "city": {"type": "string", "maxLength": 32},
    "skills": {"type": "array", "items": {"type": "string", "maxLength": 24}, "maxItems": 4},
    "employed": {"type": "boolean"}},
    "required": ["name", "age", "city", "skills", "employed"]}
SUBJECTS = ["software engineer", "painter", "farmer", "astronaut", "chef", "teacher", "pilot",
            "nurse", "musician", "carpenter", "scientist", "librarian", "sailor", "baker"]


CONTACT_REGEX = (r"Name: [A-Z][a-z]{1,12} [A-Z][a-z]{1,12}\nPhone: \(\d{3}\) \d{3}-\d{4}\n"
                 r"Email: [a-z]{1,12}\.[a-z]{1,12}@[a-z]{2,12}\.(com|org|net)")
CONTACT_GBNF = r"""root ::= "Name: " name " " name "\nPhone: (" d d d ") " d d d "-" d d d d "\nEmail: " low "." low "@" domain "." ("com" | "org" | "net")
name ::= [A-Z] [a-z]{1,12}
low ::= [a-z]{1,12}
domain ::= [a-z]{2,12}
d ::= [0-9]
"""


def ChatPrompts(n, ask):
    """SmolLM2's chat turns, on one line (pagellm's prompts file holds one prompt per line)."""
    return [f"<|im_start|>user {ask.format(SUBJECTS[i % len(SUBJECTS)], i)}<|im_end|> "
            f"<|im_start|>assistant " for i in range(n)]


def EditPrompts(n):
    """Chat prompts asking for a paragraph back, corrected; one line each."""
    with open(os.path.join(ROOT, "tools", "gpu", "reference_texts.txt")) as f:
        paragraphs = [p.strip().replace("\n", " ") for p in f.read().split("\n\n") if p.strip()]
    return [f"<|im_start|>user Repeat the following text, correcting any spelling mistakes: "
            f"{paragraphs[i % len(paragraphs)]}<|im_end|> <|im_start|>assistant "
            for i in range(n)]


def Valid(texts, constraint):
    import re

    import jsonschema
    ok = 0
    for t in texts:
        if constraint[0] != "json":
            ok += re.fullmatch(CONTACT_REGEX, t) is not None
            continue
        try:
            jsonschema.validate(json.loads(t), JSON_SCHEMA)
            ok += 1
        except (ValueError, jsonschema.ValidationError):
            pass
    return ok


def Prompts(tokenizer_json, n, length):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer_json)
    with open(os.path.join(ROOT, "tools", "gpu", "reference_texts.txt")) as f:
        paragraphs = [p.strip() for p in f.read().split("\n\n") if p.strip()]
    prompts = []
    for i in range(n):
        ids, k = [], i
        while len(ids) < length:
            ids += tok.encode(paragraphs[k % len(paragraphs)] + " ", add_special_tokens=False).ids
            k += 1
        prompts.append(tok.decode(ids[:length]).replace("\n", " "))
    return prompts


def PeerEnv(extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(extra or {})
    return env


def RunPagellm(args, w):
    runs = [RunPagellmOnce(args, w["prompts"], w["out"], w["score"], w.get("constraint"))
            for _ in range(args.repeats)]
    return max(runs, key=lambda r: r["tokens"] / r["elapsed_s"])


def RunPagellmOnce(args, prompts, out_len, score, constraint):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(prompts) + "\n")
        path = f.name
    cmd = [args.pagellm, "generate", "--model", args.pagellm_model, "--prompts-file", path,
           "--max-tokens", str(out_len), "--temperature", "0", "--threads", str(args.threads),
           "--dtype", args.pagellm_dtype, "--stats", "--json"]
    if constraint:
        kind, value = constraint
        flag = {"json": "--json-schema", "regex": "--regex", "grammar": "--grammar"}[kind]
        cmd += [flag, json.dumps(value) if kind == "json" else value]
    else:
        cmd += ["--min-tokens", str(out_len), "--ignore-eos"]
    cmd += ["--prompt-logprobs", "1"] if score else []
    cmd += ["--speculative-config", args.speculative_config] if args.speculative_config else []
    if args.lora:
        cmd += ["--lora-modules", f"test-lora={args.lora}", "--lora-adapter", "test-lora"]
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=PeerEnv())
    os.unlink(path)
    if p.returncode != 0:
        sys.exit(f"compare_vllm: pagellm failed: {p.stderr[-2000:]}")
    stats = json.loads(p.stderr.strip().splitlines()[-1])
    prompt_tokens = stats["computed_prompt_tokens"] + stats["prefix_cache_hit_tokens"]
    texts = [json.loads(line)["text"] for line in p.stdout.splitlines()] if constraint else []
    spec = stats.get("spec_decode", {})
    return {"generated_tokens": stats["generated_tokens"], "elapsed_s": stats["elapsed_s"],
            "draft_tokens": spec.get("draft_tokens", 0),
            "accepted_tokens": spec.get("accepted_tokens", 0),
            "prompt_tokens": prompt_tokens,
            "tokens": prompt_tokens if score else stats["generated_tokens"], "texts": texts}


def RunVllm(args, workloads):
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "cfg.json")
        child = os.path.join(d, "child.py")
        with open(cfg, "w") as f:
            spec = json.loads(args.speculative_config) if args.speculative_config else None
            lora_rank = 0
            if args.lora:
                with open(os.path.join(args.lora, "adapter_config.json")) as c:
                    lora_rank = max(8, json.load(c)["r"])  # vLLM's smallest max_lora_rank
            json.dump({"model": args.vllm_model, "workloads": workloads, "repeats": args.repeats,
                       "speculative_config": spec, "lora": os.path.abspath(args.lora or "") if
                       args.lora else "", "lora_rank": lora_rank}, f)
        with open(child, "w") as f:
            f.write(VLLM_CHILD)
        venv = os.path.dirname(os.path.dirname(args.vllm_python))
        env = PeerEnv({"VLLM_CPU_KVCACHE_SPACE": "4",
                       "VLLM_CPU_OMP_THREADS_BIND": f"0-{args.threads - 1}",
                       "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
                       "LD_PRELOAD": os.path.join(venv, "lib", "libiomp5.so")})
        print(f"+ {args.vllm_python} <vllm child>", file=sys.stderr, flush=True)
        p = subprocess.run([args.vllm_python, child, cfg], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env)
        if args.vllm_log:
            with open(args.vllm_log, "w") as f:
                f.write(p.stderr)
        for line in p.stdout.splitlines():
            if line.startswith("VLLM_RESULT "):
                return json.loads(line[len("VLLM_RESULT "):])
        sys.exit(f"compare_vllm: vLLM failed (exit {p.returncode}): {p.stderr[-3000:]}")


def Shape(name):
    """(n, in, out, score) of "NxIxO" or, for a scoring workload, "sNxL"."""
    if name.startswith("s"):
        n, length = (int(x) for x in name[1:].split("x"))
        return n, length, 1, True
    if name[0] == "e":
        n, out = (int(x) for x in name[1:].split("x"))
        return n, 0, out, "edit"
    if name[0] in "jrg":
        n, out = (int(x) for x in name[1:].split("x"))
        return n, 0, out, {"j": "json", "r": "regex", "g": "grammar"}[name[0]]
    n, i, o = (int(x) for x in name.split("x"))
    return n, i, o, False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm-python", required=True)
    ap.add_argument("--vllm-model", default=os.path.join(ROOT, "models",
                                                         "SmolLM2-135M-Instruct-hf"))
    ap.add_argument("--pagellm", default=os.path.join(ROOT, "build", "bin", "pagellm"))
    ap.add_argument("--pagellm-model", default=os.path.join(ROOT, "models",
                                                            "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--pagellm-dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workloads", default="all")
    ap.add_argument("--repeats", type=int, default=2, help="runs per workload; the best counts")
    ap.add_argument("--json-out")
    ap.add_argument("--vllm-log", help="write vLLM's stderr here (its thread binding, KV size)")
    ap.add_argument("--speculative-config", default="",
                    help="both engines speculate so (vLLM's JSON spelling)")
    ap.add_argument("--lora", default="",
                    help="a PEFT LoRA directory every request of both engines runs with "
                         "(e.g. models/SmolLM2-135M-Instruct-lora-test)")
    args = ap.parse_args()
    shapes = [(n, i, o, False) for n, i, o in WORKLOADS] if args.workloads == "all" else [
        Shape(w) for w in args.workloads.split(",")]
    tokenizer = os.path.join(args.vllm_model, "tokenizer.json")
    constraints = {"json": ("json", JSON_SCHEMA), "regex": ("regex", CONTACT_REGEX),
                   "grammar": ("grammar", CONTACT_GBNF)}
    asks = {"json": "Describe a fictional {} number {} as JSON.",
            "regex": "Give the contact details of a fictional {} number {}.",
            "grammar": "Give the contact details of a fictional {} number {}."}
    workloads = [{"n": n, "in": i, "out": o, "score": s is True, "edit": s == "edit",
                  "constraint": constraints.get(s) if isinstance(s, str) else None,
                  "prompts": EditPrompts(n) if s == "edit" else
                  ChatPrompts(n, asks[s]) if isinstance(s, str) else Prompts(tokenizer, n, i)}
                 for n, i, o, s in shapes]
    ours = [RunPagellm(args, w) for w in workloads]
    theirs = RunVllm(args, workloads)
    rows = []
    print(f"| {'workload':36s} | {'vLLM tok/s':>10s} | {'pagellm tok/s':>13s} | {'ratio':>6s} |")
    print(f"| {'-' * 36} | {'-' * 10} | {'-' * 13} | {'-' * 6} |")
    for w, a, b in zip(workloads, ours, theirs):
        pt = a["tokens"] / a["elapsed_s"]
        vt = b["tokens"] / b["elapsed_s"]
        name = (f"{w['n']} x ~{a['prompt_tokens'] // w['n']} scored (prompt tok/s)" if w["score"]
                else f"{w['n']} x (~{a['prompt_tokens'] // w['n']} in, {w['out']} out)")
        if w["edit"]:
            name = f"{w['n']} x edit (~{a['prompt_tokens'] // w['n']} in, {w['out']} out)"
        if w["constraint"]:
            what = {"json": "JSON schema", "regex": "regex", "grammar": "GBNF grammar"}
            name = f"{w['n']} x {what[w['constraint'][0]]} (<= {w['out']} out)"
        print(f"| {name:36s} | {vt:10.1f} | {pt:13.1f} | {pt / vt:6.2f} |")
        row = {"workload": name, "vllm": b, "pagellm": a, "ratio": pt / vt}
        if w["constraint"]:
            row["valid"] = {"pagellm": Valid(a["texts"], w["constraint"]),
                            "vllm": Valid(b["texts"], w["constraint"])}
            print(f"|   {'requests/s; valid replies':34s} | {w['n'] / b['elapsed_s']:6.2f}; "
                  f"{row['valid']['vllm']:2d} | {w['n'] / a['elapsed_s']:9.2f}; "
                  f"{row['valid']['pagellm']:2d} | {b['elapsed_s'] / a['elapsed_s']:6.2f} |")
        rows.append(row)
    print("ratio = pagellm / vLLM output tok/s (scored workloads: prompt tok/s; higher is better "
          "for pagellm)")
    if args.speculative_config:
        drafted = sum(r["pagellm"].get("draft_tokens", 0) for r in rows)
        accepted = sum(r["pagellm"].get("accepted_tokens", 0) for r in rows)
        print(f"both speculating: {args.speculative_config}; pagellm accepted {accepted} of "
              f"{drafted} drafted tokens")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
