#!/usr/bin/env python3
"""Validates rendered Kubernetes manifests offline.

  validate_manifests.py --kube-version 1.30.0 RENDERED.yaml

Every document of RENDERED.yaml (a `helm template` output) must be either
  - a built-in kind, valid against kubernetes-validate's bundled schema of that Kubernetes
    version in strict mode (unknown fields rejected); a kind or apiVersion without a bundled
    schema is an ERROR (the kubernetes-validate CLI only warns), or
  - one of the CRD kinds in CRD_CHECKS, whose schemas are not bundled: checked structurally
    (apiVersion, metadata.name/namespace, and the spec fields the chart relies on).
Prints one line per problem and, last, one summary line:
  RESULT rendered=N validated=N crd_checked=N errors=N
Exit status: 0 when errors=0, else 1.
"""
import argparse
import sys

import kubernetes_validate
import yaml

# kind -> (apiVersion, spec fields that must be present). Contract: these are the only kinds
# accepted without a schema; anything else must validate.
CRD_CHECKS = {
    "ServiceMonitor": ("monitoring.coreos.com/v1", ["selector", "endpoints"]),
    "PodMonitor": ("monitoring.coreos.com/v1", ["selector", "podMetricsEndpoints"]),
    "PrometheusRule": ("monitoring.coreos.com/v1", ["groups"]),
    "ScaledObject": ("keda.sh/v1alpha1", ["scaleTargetRef", "triggers"]),
}


def check_crd(doc):
    """Structural check of a CRD object; returns a list of problems."""
    kind = doc["kind"]
    api_version, spec_fields = CRD_CHECKS[kind]
    problems = []
    if doc.get("apiVersion") != api_version:
        problems.append(f"apiVersion {doc.get('apiVersion')!r}, want {api_version!r}")
    meta = doc.get("metadata") or {}
    if not meta.get("name") or not meta.get("namespace"):
        problems.append("metadata.name and metadata.namespace are required")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return problems + ["spec missing"]
    problems += [f"spec.{f} missing or empty" for f in spec_fields if not spec.get(f)]
    if kind == "PrometheusRule":
        for g in spec.get("groups") or []:
            if not g.get("name") or not isinstance(g.get("rules"), list):
                problems.append("every group needs a name and a rules list")
            for r in g.get("rules") or []:
                if not r.get("expr") or not (r.get("alert") or r.get("record")):
                    problems.append(f"group {g.get('name')}: a rule needs expr and alert/record")
    if kind == "ScaledObject":
        for t in spec.get("triggers") or []:
            md = t.get("metadata") or {}
            if t.get("type") == "prometheus" and not all(
                    md.get(k) for k in ("serverAddress", "query", "threshold")):
                problems.append("prometheus trigger needs serverAddress, query, threshold")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kube-version", required=True)
    ap.add_argument("rendered")
    args = ap.parse_args()
    with open(args.rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    validated = crd_checked = errors = 0
    for doc in docs:
        kind = doc.get("kind", "?")
        name = f"{kind}/{(doc.get('metadata') or {}).get('name', '?')}"
        if kind in CRD_CHECKS:
            problems = check_crd(doc)
            crd_checked += 1
        else:
            problems = []
            try:
                kubernetes_validate.validate(doc, args.kube_version, strict=True)
                validated += 1
            except kubernetes_validate.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                problems.append(f"{path}: {e.message}")
            except kubernetes_validate.SchemaNotFoundError as e:
                problems.append(f"no schema: {e.message}")
        for p in problems:
            print(f"ERROR {name}: {p}")
        errors += len(problems)
    skipped = sorted({d["kind"] for d in docs if d.get("kind") in CRD_CHECKS})
    if skipped:
        print(f"NOTE not in the bundled schemas, checked structurally: {', '.join(skipped)}")
    print(f"RESULT rendered={len(docs)} validated={validated} crd_checked={crd_checked} "
          f"errors={errors}")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
