#!/usr/bin/env python3
"""Scores our greedy output against a reference's (hf_reference.py's ref.json).

  python3 tools/gpu/compare.py REF.json OURS.json [--min-prefix 0.90] [--min-teacher 0.99]

REF.json:  {"model", "prompts": [[ids]], "greedy": [[ids]], "max_tokens"}
OURS.json: {"greedy": [[ids]], "teacher_forced_top1": [[ids]]}, one list per prompt, each
           max_tokens long; teacher_forced_top1[i][j] is our argmax at position
           len(prompt_i)-1+j of prompt_i + ref greedy_i.
prefix:  mean over prompts of (tokens before our greedy first differs from the reference's)
         / max_tokens.
teacher: fraction of positions where teacher_forced_top1 equals the reference's greedy token.
beams:   when REF.json has "beam" ({"width", "max_tokens", "beams": [[[ids] x width]]}) and
         OURS.json "beams" of the same shape: mean over (prompt, rank) of the tokens before our
         beam of that rank first differs from the reference's, / max_tokens. The bar (0.80) sits
         below the noise floor of two transformers precisions (bf16 against fp32: 0.91 on the
         head_dim-32 tiny models check.sh dry-run used until 2026-12-05, 1.00 on today's
         head_dim-64 ones; our fp32 CPU beams match fp32 transformers' exactly).
Prints `MODEL prefix=P teacher=T [beams=B] PASS|FAIL` (4 decimals); exits 1 on FAIL or on
malformed input.
Plain python3, no dependencies.
"""

import argparse
import json
import sys


class Malformed(Exception):
    pass


def Load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Malformed(f"{path}: {e}")


def IdLists(doc, key, path, count, length):
    """doc[key] checked as count lists of length ints each."""
    lists = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(lists, list):
        raise Malformed(f"{path}: '{key}' is missing or not a list")
    if len(lists) != count:
        raise Malformed(f"{path}: '{key}' has {len(lists)} lists, expected {count}")
    for i, ids in enumerate(lists):
        if not isinstance(ids, list) or not all(type(t) is int for t in ids):
            raise Malformed(f"{path}: '{key}'[{i}] is not a list of integers")
        if length is not None and len(ids) != length:
            raise Malformed(f"{path}: '{key}'[{i}] has {len(ids)} ids, expected {length}")
    return lists


def Score(ref, ours, ref_path="REF", ours_path="OURS"):
    """(prefix, teacher) for the two documents; raises Malformed."""
    if not isinstance(ref, dict):
        raise Malformed(f"{ref_path}: not a JSON object")
    n = ref.get("max_tokens")
    if type(n) is not int or n < 1:
        raise Malformed(f"{ref_path}: 'max_tokens' is missing or not a positive integer")
    count = len(ref["prompts"]) if isinstance(ref.get("prompts"), list) else -1
    if count == 0:
        raise Malformed(f"{ref_path}: 'prompts' is empty")
    prompts = IdLists(ref, "prompts", ref_path, count, None)
    want = IdLists(ref, "greedy", ref_path, len(prompts), n)
    got = IdLists(ours, "greedy", ours_path, len(prompts), n)
    forced = IdLists(ours, "teacher_forced_top1", ours_path, len(prompts), n)
    prefix = 0
    for w, g in zip(want, got):
        same = next((j for j in range(n) if w[j] != g[j]), n)
        prefix += same / n
    teacher = sum(w[j] == f[j] for w, f in zip(want, forced) for j in range(n))
    return prefix / len(prompts), teacher / (n * len(prompts))


def BeamScore(ref, ours, ref_path="REF", ours_path="OURS"):
    """The beams figure, or None when REF has no "beam"; raises Malformed."""
    spec = ref.get("beam") if isinstance(ref, dict) else None
    if spec is None:
        return None
    if not isinstance(spec, dict) or not isinstance(spec.get("beams"), list):
        raise Malformed(f"{ref_path}: 'beam' is not an object with 'beams'")
    n, width = spec.get("max_tokens"), spec.get("width")
    if type(n) is not int or n < 1 or type(width) is not int or width < 1:
        raise Malformed(f"{ref_path}: 'beam' needs positive integers max_tokens and width")
    want, got = spec["beams"], ours.get("beams") if isinstance(ours, dict) else None
    if not isinstance(got, list) or len(got) != len(want) or not want:
        raise Malformed(f"{ours_path}: 'beams' is missing or has the wrong number of prompts")
    total = 0.0
    for i, (w, g) in enumerate(zip(want, got)):
        IdLists({"b": w}, "b", ref_path, width, n)
        IdLists({"b": g}, "b", f"{ours_path} beams[{i}]", width, n)
        for wr, gr in zip(w, g):
            total += next((j for j in range(n) if wr[j] != gr[j]), n) / n
    return total / (len(want) * width)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref")
    ap.add_argument("ours")
    ap.add_argument("--min-prefix", type=float, default=0.90)
    ap.add_argument("--min-teacher", type=float, default=0.99)
    ap.add_argument("--min-beams", type=float, default=0.80)
    args = ap.parse_args()
    try:
        ref, ours = Load(args.ref), Load(args.ours)
        prefix, teacher = Score(ref, ours, args.ref, args.ours)
        beams = BeamScore(ref, ours, args.ref, args.ours)
    except Malformed as e:
        print(f"compare: malformed input: {e}", file=sys.stderr)
        return 1
    ok = prefix >= args.min_prefix and teacher >= args.min_teacher
    beam_text = ""
    if beams is not None:
        ok = ok and beams >= args.min_beams
        beam_text = f" beams={beams:.4f}"
    print(f"{ref.get('model', '?')} prefix={prefix:.4f} teacher={teacher:.4f}{beam_text} "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
