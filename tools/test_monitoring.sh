#!/usr/bin/env bash
# Tests the monitoring assets against real tools:
#   1. promtool: `check rules` on deploy/prometheus/alerts.yaml and `test rules` on its unit tests
#      (each alert fires and does not fire on synthetic series); the TTFT SLO marker the Helm
#      chart substitutes is there once;
#   2. live: two CPU workers (default model, one with a KV pool small enough to preempt by swap
#      and by recompute) and a router on loopback, a real `prometheus` scraping their three
#      /metrics every second (alerts.yaml loaded as its rules), and streaming /v1/completions
#      load (tools/monitoring/drive_load.py); while the load runs,
#      tools/monitoring/check_queries.py runs every PromQL expression of
#      deploy/grafana/pagellm.json and every selector of the alert rules against Prometheus and
#      requires data from each, and queries written as for vLLM's dashboards against worker 1's
#      --vllm-metrics names; it prints a table (query, series count).
# Exits non-zero when any check fails. Every process it starts is stopped on exit.
# Requires: build/bin (tools/build.sh), models/ (tools/prepare_models.sh), promtool and
# prometheus (Debian package `prometheus`, installed by tools/setup.sh). About 45 seconds.
# LOAD_SECONDS (30) sets how long the load runs; the checks run QUERY_AFTER (20) s into it (every
# check passed at 22 and 14 on the 2-core development machine).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
alerts=deploy/prometheus/alerts.yaml
dashboard=deploy/grafana/pagellm.json
load_seconds=${LOAD_SECONDS:-30}
query_after=${QUERY_AFTER:-20}
py=python3
[ -x .venv/bin/python3 ] && py=.venv/bin/python3

for t in promtool prometheus curl; do
  command -v "$t" > /dev/null || { echo "test_monitoring: $t missing (tools/setup.sh)" >&2; exit 1; }
done

# 1. promtool.
promtool check rules "$alerts"
promtool test rules deploy/prometheus/alerts_test.yaml
# The Helm chart replaces the TTFT SLO at this marker (helm/pagellm/templates/prometheusrule.yaml):
# it must stay exactly one line.
[ "$(grep -cE '> [0-9.]+ # ttft_p99_slo_seconds$' "$alerts")" = 1 ] ||
  { echo "test_monitoring: $alerts needs exactly one '> N # ttft_p99_slo_seconds' line" >&2; exit 1; }
echo "test_monitoring: promtool ok"

[ -x build/bin/pagellm-worker ] || { echo "test_monitoring: build first (tools/build.sh)" >&2; exit 1; }
[ -f "$model" ] || { echo "test_monitoring: $model missing (tools/prepare_models.sh)" >&2; exit 1; }

# 2. Live.
tmp=$(mktemp -d)
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null || true; done
  if [ "$rc" -ne 0 ]; then
    for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() {  # URL SECONDS: until URL answers 200
  for _ in $(seq $(($2 * 5))); do
    curl -sf -o /dev/null "$1" && return 0
    sleep 0.2
  done
  echo "test_monitoring: $1 did not answer within $2 s" >&2
  return 1
}
read -r w1 w2 wm1 wm2 rg rh rm pp < <(for _ in 1 2 3 4 5 6 7 8; do free_port; done | xargs)

# Both serve the test LoRA adapter (tools/prepare_models.sh makes it), which a third of the
# load asks for (the dashboard's LoRA panel).
worker=(build/bin/pagellm-worker --model "$model" --threads 1 --host 127.0.0.1
  --lora-modules test-lora=models/SmolLM2-135M-Instruct-lora-test)
# Worker 1: 24 KV blocks (384 tokens) and a 29-block swap pool: the load overflows it, so it
# preempts (n=2 groups by swap, single sequences by recompute); it also exposes vLLM's metric
# names (--vllm-metrics), which queries as vLLM's dashboards write them must find. Worker 2: 40
# blocks, and n-gram
# speculation (the dashboard's acceptance panel).
"${worker[@]}" --port "$w1" --metrics-port "$wm1" --num-kv-blocks 24 --swap-space 0.01 \
  --vllm-metrics > "$tmp/worker1.log" 2>&1 &
pids+=($!)
"${worker[@]}" --port "$w2" --metrics-port "$wm2" --num-kv-blocks 40 --swap-space 0.05 \
  --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}' \
  > "$tmp/worker2.log" 2>&1 &
pids+=($!)
# A short queue, so that the load also gets some RESOURCE_EXHAUSTED (HTTP 429).
build/bin/pagellm-router --workers "127.0.0.1:$w1,127.0.0.1:$w2" --port "$rg" --http-port "$rh" \
  --metrics-port "$rm" --max-queue 4 > "$tmp/router.log" 2>&1 &
pids+=($!)

cat > "$tmp/prometheus.yml" << EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $PWD/$alerts
scrape_configs:
  - job_name: pagellm-worker
    static_configs:
      - targets: ["127.0.0.1:$wm1", "127.0.0.1:$wm2"]
  - job_name: pagellm-router
    static_configs:
      - targets: ["127.0.0.1:$rm"]
EOF
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="127.0.0.1:$pp" --log.level=warn > "$tmp/prometheus.log" 2>&1 &
pids+=($!)

wait_http "http://127.0.0.1:$rh/health" 60  # 200 once a worker is ready
wait_http "http://127.0.0.1:$pp/-/ready" 30
echo "test_monitoring: services up at $((SECONDS - start)) s; load for $load_seconds s"

"$py" tools/monitoring/drive_load.py --url "http://127.0.0.1:$rh" --seconds "$load_seconds" \
  --concurrency 20 --lora test-lora > "$tmp/load.out" 2>&1 &
load_pid=$!
pids+=($load_pid)
sleep "$query_after" &  # waited on, so that a signal ends the run at once
pids+=($!)
wait $!
status=0
"$py" tools/monitoring/check_queries.py --prometheus "http://127.0.0.1:$pp" \
  --dashboard "$dashboard" --alerts "$alerts" --rate-interval 30s \
  --require-positive 'sum(increase(pagellm_preemptions_total{mode="swap"}[5m]))' \
  --require-positive 'sum(increase(pagellm_preemptions_total{mode="recompute"}[5m]))' \
  --require-positive 'max(max_over_time(pagellm_requests_swapped[5m]))' \
  --require-positive 'max(max_over_time(pagellm_kv_cache_usage_ratio{pool="swap"}[5m]))' \
  --require-positive 'sum(increase(pagellm_prefix_cache_hit_tokens_total[5m]))' \
  --require-positive 'sum(increase(pagellm_spec_decode_accepted_tokens_total[5m]))' \
  --require-positive 'sum(increase(pagellm_lora_requests_total{adapter="test-lora"}[5m]))' \
  --require-positive 'max(max_over_time(pagellm_router_queue_length[5m]))' \
  --require-positive 'sum(increase(pagellm_router_requests_total{code="RESOURCE_EXHAUSTED"}[5m]))' \
  --require-positive 'sum(increase(vllm:num_preemptions_total{engine="0"}[5m]))' \
  --require-positive 'max(max_over_time(vllm:kv_cache_usage_perc[5m]))' \
  --require-positive 'sum by (model_name) (rate(vllm:generation_tokens_total[30s]))' \
  --require-positive 'sum(increase(vllm:request_success_total[5m]))' \
  --require-positive 'histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[30s])))' \
  --require-positive 'histogram_quantile(0.5, sum by (le) (rate(vllm:request_time_per_output_token_seconds_bucket[30s])))' \
  || status=1
wait "$load_pid" || status=1
cat "$tmp/load.out"
echo "test_monitoring: $([ $status -eq 0 ] && echo ok || echo FAILED) in $((SECONDS - start)) s"
exit $status
