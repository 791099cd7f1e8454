#!/usr/bin/env bash
# Builds the CPU container image offline and checks that its worker serves inside it:
#   1. a Debian 12 minbase root filesystem made with debootstrap (cached in .cache/container/)
#      is imported as the base image localhost/debian-base:bookworm;
#   2. deploy/container/stage.sh stages build/bin's binaries and their libraries, and
#      `buildah bud --isolation chroot` builds deploy/container/Containerfile.cpu on that base;
#   3. inside the image (`buildah run --isolation chroot`, as its non-root user, the model mounted
#      read-only) a worker and a router start, the worker answers grpc.health.v1 SERVING, and
#      the image's own CLI generates through the router.
# Prints the image size. Needs root (or a user namespace) for buildah/podman with the vfs driver;
# `podman run` does not work on these machines (setrlimit), `buildah run` does.
# Requires: tools/build.sh and tools/prepare_models.sh done; debootstrap, buildah, podman.
set -euo pipefail
cd "$(dirname "$0")/.."
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -x build/bin/pagellm-worker ] || { echo "test_image: build first (tools/build.sh)" >&2; exit 1; }
[ -f "$model" ] || { echo "test_image: $model missing (tools/prepare_models.sh)" >&2; exit 1; }
for t in debootstrap buildah podman; do
  command -v "$t" > /dev/null || { echo "test_image: $t missing (tools/setup.sh)" >&2; exit 1; }
done
S=(--storage-driver vfs)
base=localhost/debian-base:bookworm
image=localhost/pagellm-cpu:test
start=$(date +%s)

# 1. The base image.
if ! podman "${S[@]}" image exists "$base"; then
  tarball=.cache/container/bookworm-minbase.tar
  if [ ! -f "$tarball" ]; then
    mkdir -p .cache/container
    rootfs=$(mktemp -d)
    chmod 0755 "$rootfs"  # mktemp makes it 0700: the image root must be traversable
    debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian > /dev/null
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
  fi
  podman "${S[@]}" import "$tarball" "$base" > /dev/null
fi

# 2. The image.
ctx=$(mktemp -d)
ctr=""
cleanup() {
  pkill -f "pagellm-(worker|router) .*--port=${port_w:-0}\b" 2> /dev/null || true
  pkill -f "pagellm-router .*--port=${port_r:-0}\b" 2> /dev/null || true
  [ -n "$ctr" ] && buildah "${S[@]}" rm "$ctr" > /dev/null 2>&1 || true
  rm -rf "$ctx"
}
trap cleanup EXIT
deploy/container/stage.sh build/bin "$ctx"
buildah "${S[@]}" bud --quiet --isolation chroot --build-arg "BASE=$base" \
  -f "$ctx/Containerfile.cpu" -t "$image" "$ctx" > /dev/null
size=$(podman "${S[@]}" image inspect --format '{{.Size}}' "$image")
base_size=$(podman "${S[@]}" image inspect --format '{{.Size}}' "$base")

# 3. Serving inside it.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port_w=$(free_port)
port_r=$(free_port)
port_h=$(free_port)
ctr=$(buildah "${S[@]}" from "$image")
run() { buildah "${S[@]}" run --isolation chroot -v "$PWD/models:/models:ro" "$ctr" -- "$@"; }
user=$(run id -un)
[ "$user" = pagellm ] || { echo "test_image: runs as '$user', not pagellm" >&2; exit 1; }
run /usr/local/bin/pagellm-worker --model "/models/$(basename "$model")" --port="$port_w" \
  --metrics-port=0 --threads=2 --num-kv-blocks=256 > "$ctx/worker.log" 2>&1 &
run /usr/local/bin/pagellm-router --workers "127.0.0.1:$port_w" --port="$port_r" \
  --http-port="$port_h" --metrics-port=0 > "$ctx/router.log" 2>&1 &
health=$(.venv/bin/python - "$port_w" << 'PY'
import sys, time, grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
# Reconnect quickly: gRPC's default backoff would retry a refused connection only after 1, 2.6,
# 4.2, ... s.
stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(
    f"127.0.0.1:{sys.argv[1]}",
    options=[("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 500)]))
deadline = time.time() + 120
while True:
    try:
        r = stub.Check(health_pb2.HealthCheckRequest(), timeout=2)
        if r.status == health_pb2.HealthCheckResponse.SERVING or time.time() > deadline:
            print(health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)); break
    except grpc.RpcError:
        if time.time() > deadline:
            print("UNREACHABLE"); break
    time.sleep(0.5)
PY
)
if [ "$health" != SERVING ]; then
  echo "test_image: the worker in the image is $health" >&2
  cat "$ctx/worker.log" >&2
  exit 1
fi
text=""
for _ in $(seq 60); do  # the router serves once it has polled the worker
  if text=$(run /usr/local/bin/pagellm generate --server "127.0.0.1:$port_r" \
      --prompt "The capital of France is" --max-tokens 8 --temperature 0 2> "$ctx/cli.log"); then
    break
  fi
  text=""
  sleep 1
done
if [ -z "$text" ]; then
  echo "test_image: no generation through the image's router" >&2
  cat "$ctx/cli.log" "$ctx/router.log" >&2
  exit 1
fi
echo "test_image: $image (base $base): worker health $health, generated ${#text} bytes"
printf 'test_image: image %d MB, of which the base %d MB; %d s\n' \
  $((size / 1000000)) $((base_size / 1000000)) $(($(date +%s) - start))
