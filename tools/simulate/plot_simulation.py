#!/usr/bin/env python3
"""Draws pagellm-simulate results (its --csv output) in the style of the vLLM paper's figures.

  plot_simulation.py RESULTS.csv OUT.png [--rate R] [--max-latency S]

Three panels:
  1. mean normalized latency (s/token) against request rate, one line per policy (Fig. 12 left);
     the y axis stops at --max-latency (default 1 s/token, as in the paper) when a policy is
     overloaded, so the knee of the others stays readable;
  2. mean batched requests against request rate (Fig. 12 right);
  3. the KV memory split per policy at one rate (--rate, default the largest, where the pool is
     most contended), stacked to 100% (Fig. 2).

CSV columns used: policy, request_rate, mean_norm_latency_s,
mean_batched, live_frac, reserved_frac, internal_frac, external_frac, free_frac, model, gpu,
trace. Requires matplotlib (tools/requirements-test.txt).
"""
import argparse
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

POLICY_ORDER = ["orca-max", "orca-pow2", "orca-oracle", "pagellm"]
SPLIT = [("live_frac", "token states", "#4c9a2a"),
         ("reserved_frac", "reservation", "#f2b134"),
         ("internal_frac", "internal frag.", "#e4572e"),
         ("external_frac", "external frag.", "#8c2f39"),
         ("free_frac", "free", "#d9d9d9")]


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{path}: no results")
    for r in rows:
        for k, v in r.items():
            try:
                r[k] = float(v)
            except (TypeError, ValueError):
                pass
    return rows


def pick_rate(rows, wanted):
    rates = sorted({r["request_rate"] for r in rows})
    if wanted is not None:
        return min(rates, key=lambda x: abs(x - wanted))
    return rates[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--rate", type=float, default=None, help="request rate of the memory panel")
    ap.add_argument("--max-latency", type=float, default=1.0, help="latency axis limit, s/token")
    args = ap.parse_args()

    rows = read_rows(args.csv)
    by_policy = defaultdict(list)
    for r in rows:
        by_policy[r["policy"]].append(r)
    policies = [p for p in POLICY_ORDER if p in by_policy] + \
        sorted(p for p in by_policy if p not in POLICY_ORDER)

    fig, (ax_lat, ax_batch, ax_mem) = plt.subplots(1, 3, figsize=(16, 4.5))
    top = 0.0
    for p in policies:
        pts = sorted(by_policy[p], key=lambda r: r["request_rate"])
        xs = [r["request_rate"] for r in pts]
        lat = [r["mean_norm_latency_s"] for r in pts]
        top = max(top, max(lat))
        ax_lat.plot(xs, lat, marker="o", label=p)
        ax_batch.plot(xs, [r["mean_batched"] for r in pts], marker="o", label=p)
    ax_lat.set_ylim(0, min(top * 1.05, args.max_latency) if top > 0 else 1)
    ax_lat.set_xlabel("request rate (req/s)")
    ax_lat.set_ylabel("normalized latency (s/token)")
    ax_lat.set_title("latency")
    ax_lat.legend()
    ax_batch.set_xlabel("request rate (req/s)")
    ax_batch.set_ylabel("mean batched requests")
    ax_batch.set_title("batch size")
    ax_batch.legend()

    rate = pick_rate(rows, args.rate)
    at_rate = {r["policy"]: r for r in rows if r["request_rate"] == rate}
    names = [p for p in policies if p in at_rate]
    bottom = [0.0] * len(names)
    for key, label, color in SPLIT:
        vals = [100 * at_rate[p][key] for p in names]
        ax_mem.bar(names, vals, bottom=bottom, label=label, color=color)
        for i, (b, v) in enumerate(zip(bottom, vals)):
            if key == "live_frac" and v > 4:
                ax_mem.text(i, b + v / 2, f"{v:.1f}%", ha="center", va="center", fontsize=8)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax_mem.set_ylabel("% of KV pool (time-averaged)")
    ax_mem.set_title(f"KV memory at {rate:g} req/s")
    ax_mem.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))

    first = rows[0]
    fig.suptitle(f"{first.get('model', '')} on {first.get('gpu', '')}, "
                 f"trace {first.get('trace', '')} (pagellm-simulate)")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
