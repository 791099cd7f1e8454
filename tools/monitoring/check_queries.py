#!/usr/bin/env python3
"""Checks the Grafana dashboard and the alert rules against a live Prometheus (stdlib only).

  check_queries.py --prometheus http://127.0.0.1:9090 --dashboard deploy/grafana/pagellm.json \
      [--alerts deploy/prometheus/alerts.yaml] [--rate-interval 30s] [--require-positive EXPR]...

Contract:
  * Dashboard (static): valid JSON, schemaVersion >= 36, the variables `datasource` (type
    datasource, prometheus), `worker` and `router`; unique panel ids; every target of every panel
    (rows' nested panels included) has an `expr` and the `${datasource}` data source.
  * Dashboard (live): every panel target's expr and every query variable's label_values(M, L)
    (run as `group by (L) (M)`), with the variables substituted ($worker, $router: `.*`;
    $__rate_interval, $__interval: --rate-interval), is run at /api/v1/query and must return at
    least one series with at least one finite value (NaN only, e.g. a quantile of an idle
    histogram, counts as no data). Any `$` left after substitution is an error.
  * Alerts (live, with --alerts): every vector selector in every rule (pagellm_* and `up`, label
    matchers included) must select at least one series, and every rule loaded into this
    Prometheus (its rule_files) must report health "ok".
  * Each --require-positive EXPR (evidence that the load exercised what the panels show, e.g.
    swap preemptions) must return a series whose value is above 0.
Prints one table row per query (panel title, refId, series, finite values) and exits 1 when any
check fails.
"""
import argparse
import json
import math
import re
import sys
import urllib.parse
import urllib.request

VARIABLES = ("worker", "router")


def query(base, expr):
    url = base.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=30) as resp:
        body = json.load(resp)
    if body.get("status") != "success":
        raise RuntimeError(body.get("error", "query failed"))
    return body["data"]["result"]


def substitute(expr, rate_interval):
    for name in VARIABLES:
        expr = re.sub(r"\$\{" + name + r"(:[a-z]+)?\}|\$" + name + r"\b", ".*", expr)
    expr = re.sub(r"\$\{?__(rate_)?interval\}?", rate_interval, expr)
    if "$" in expr:
        raise ValueError(f"unsubstituted variable in: {expr}")
    return expr


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def static_errors(dash):
    errors = []
    if dash.get("schemaVersion", 0) < 36:
        errors.append(f"schemaVersion {dash.get('schemaVersion')} < 36")
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("datasource", {})
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        errors.append("no `datasource` variable of type datasource (prometheus)")
    for name in VARIABLES:
        if name not in variables:
            errors.append(f"no `{name}` variable")
    ids = [p.get("id") for p in walk_panels(dash.get("panels", []))]
    if len(ids) != len(set(ids)) or None in ids:
        errors.append(f"panel ids missing or repeated: {ids}")
    for p in walk_panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            if not t.get("expr"):
                errors.append(f"panel {p.get('title')!r} target {t.get('refId')}: no expr")
            if (t.get("datasource") or p.get("datasource") or {}).get("uid") != "${datasource}":
                errors.append(f"panel {p.get('title')!r} target {t.get('refId')}: data source "
                              "is not ${datasource}")
    return errors


def dashboard_queries(dash):
    """(title, refId, expr) for every query the dashboard runs."""
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"\s*label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)\s*", q)
        if not m:
            raise ValueError(f"variable {v['name']}: unsupported query {q!r}")
        yield f"variable ${v['name']}", "-", f"group by ({m.group(2)}) ({m.group(1)})"
    for p in walk_panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            yield p["title"], t.get("refId", "?"), t["expr"]


def alert_selectors(path):
    """Vector selectors (metric name plus matchers) used by the rules file, in order."""
    text = open(path, encoding="utf-8").read()
    exprs = []
    # The rules file's expressions: `expr: ...` one-liners and `expr: |` blocks.
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)expr:\s*(.*)$", line)
        if not m:
            continue
        if m.group(2).strip() != "|":
            exprs.append(m.group(2))
            continue
        block = []
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= len(m.group(1)):
                break
            block.append(nxt)
        exprs.append("\n".join(block))
    selectors = []
    for e in exprs:
        e = re.sub(r"#.*", "", e)
        for s in re.finditer(r"\b(pagellm_\w+|up)(\{[^}]*\})?", e):
            if s.group(0) not in selectors:
                selectors.append(s.group(0))
    return selectors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--dashboard", required=True)
    ap.add_argument("--alerts")
    ap.add_argument("--rate-interval", default="30s")
    ap.add_argument("--require-positive", action="append", default=[], metavar="EXPR")
    args = ap.parse_args()

    with open(args.dashboard, encoding="utf-8") as f:
        dash = json.load(f)
    failures = static_errors(dash)
    for e in failures:
        print(f"dashboard: {e}")

    rows = []
    for title, ref, expr in dashboard_queries(dash):
        rows.append(("dashboard", title, ref, substitute(expr, args.rate_interval)))
    if args.alerts:
        for sel in alert_selectors(args.alerts):
            rows.append(("alerts", "selector", "-", sel))

    width = max(len(r[1]) for r in rows)
    print(f"{'source':<9}  {'panel':<{width}}  ref  series  finite  query")
    for source, title, ref, expr in rows:
        try:
            result = query(args.prometheus, expr)
            series = len(result)
            finite = sum(1 for s in result if math.isfinite(float(s["value"][1])))
        except Exception as e:  # noqa: BLE001 -- report and fail this row
            series, finite = 0, 0
            print(f"  query error: {e}")
        bad = series == 0 or finite == 0
        if bad:
            failures.append(f"{title} {ref}: {series} series, {finite} finite")
        one_line = " ".join(expr.split())
        print(f"{source:<9}  {title:<{width}}  {ref:<3}  {series:>6}  {finite:>6}  "
              f"{one_line}{'   <-- NO DATA' if bad else ''}")

    for expr in args.require_positive:
        try:
            values = [float(s["value"][1]) for s in query(args.prometheus, expr)]
        except Exception as e:  # noqa: BLE001 -- report and fail this row
            values = []
            print(f"  query error: {e}")
        ok = any(v > 0 for v in values)
        if not ok:
            failures.append(f"not positive: {expr} = {values}")
        shown = ", ".join(f"{v:g}" for v in values) or "no series"
        print(f"load: {shown:>10}  {expr}{'' if ok else '   <-- NOT POSITIVE'}")

    if args.alerts:
        url = args.prometheus.rstrip("/") + "/api/v1/rules"
        with urllib.request.urlopen(url, timeout=30) as resp:
            groups = json.load(resp)["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        unhealthy = [f"{r['name']}: {r.get('health')} {r.get('lastError', '')}" for r in rules
                     if r.get("health") != "ok"]
        print(f"alerts: {len(rules)} rules loaded in Prometheus, "
              f"{len(rules) - len(unhealthy)} evaluated with health ok; firing now: "
              f"{sorted(r['name'] for r in rules if r.get('state') == 'firing') or 'none'}")
        if not rules:
            failures.append("no rules loaded")
        failures.extend(unhealthy)

    if failures:
        print(f"check_queries: FAILED ({len(failures)}):\n  " + "\n  ".join(failures))
        return 1
    print(f"check_queries: ok, {len(rows)} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
