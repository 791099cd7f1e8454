#!/usr/bin/env bash
# Serves the default model on localhost: one pagellm-worker (gRPC :50061, metrics :9400) behind
# a pagellm-router (public gRPC :50051, OpenAI-compatible HTTP :8000, metrics :9401). Answers one demo request through the
# router, prints how to call it, and serves until Ctrl-C (then drains both and exits).
#
#   tools/serve.sh [MODEL]       (after tools/setup.sh, tools/build.sh, tools/fetch_model.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
ROUTER_PORT="${PAGELLM_ROUTER_PORT:-50051}"
WORKER_PORT="${PAGELLM_WORKER_PORT:-50061}"
mkdir -p .cache/logs

build/bin/pagellm-worker --model "$MODEL" --host 127.0.0.1 --port "$WORKER_PORT" \
  --metrics-port 9400 > .cache/logs/worker.log 2>&1 &
WORKER=$!
build/bin/pagellm-router --host 127.0.0.1 --port "$ROUTER_PORT" --metrics-port 9401 \
  --http-port "${PAGELLM_HTTP_PORT:-8000}" \
  --workers "127.0.0.1:$WORKER_PORT" > .cache/logs/router.log 2>&1 &
ROUTER=$!
stop() { kill -TERM "$ROUTER" "$WORKER" 2>/dev/null || true; wait 2>/dev/null || true; }
trap stop EXIT INT TERM

# The router answers once it has the worker's tokenizer; retry the demo until then.
for _ in $(seq 1 120); do
  if out=$(build/bin/pagellm generate --server "127.0.0.1:$ROUTER_PORT" \
             --prompt "The capital of France is" --max-tokens 16 --temperature 0 2>/dev/null); then
    echo "demo: The capital of France is$out"
    break
  fi
  kill -0 "$WORKER" "$ROUTER" 2>/dev/null || { echo "a service exited; see .cache/logs/"; exit 1; }
  sleep 0.5
done

cat <<MSG

pagellm is serving $MODEL on 127.0.0.1:$ROUTER_PORT (gRPC) and 127.0.0.1:${PAGELLM_HTTP_PORT:-8000}
(OpenAI-compatible HTTP; metrics: :9400 worker, :9401 router).
  curl -s 127.0.0.1:${PAGELLM_HTTP_PORT:-8000}/v1/chat/completions -H 'Content-Type: application/json' \\
      -d '{"messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 64}'
  build/bin/pagellm generate --server 127.0.0.1:$ROUTER_PORT --prompt "Hello" --max-tokens 32
  .venv/bin/python tools/client/pagellm_client.py --server 127.0.0.1:$ROUTER_PORT --chat "Hi!"
  grpcurl -plaintext -d '{"text": "Hello", "sampling": {"max_tokens": 16}}' \\
      127.0.0.1:$ROUTER_PORT pagellm.v1.Generation/Generate
Logs in .cache/logs/. Ctrl-C stops both services.
MSG
wait "$ROUTER"
