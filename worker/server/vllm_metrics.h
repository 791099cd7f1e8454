// VllmMetricsView: the worker's metrics a second time under the names, types and labels of
// vLLM's V1 engine (vllm:num_requests_waiting, vllm:kv_cache_usage_perc,
// vllm:time_to_first_token_seconds, ...), so that dashboards, alerts and autoscalers written for
// a vLLM server read a pagellm worker unchanged (pagellm-worker --vllm-metrics).
//
// It is a view, not a second set of metrics: each scrape collects the worker's registry and
// renames what has a vLLM counterpart, so the engine thread updates nothing twice. Every series
// gets vLLM's labels model_name (the served model name) and engine ("0": one engine per worker).
// What differs from vLLM's meaning is stated at the mapping (vllm_metrics.cc) and in the README.
// The names, types and label names are checked against vLLM's own source
// (tests/data/metrics/vllm_metrics.json, tools/fixtures/make_vllm_metrics_fixture.py).
//
// Thread-safe: Collect() only reads the registry, which is.
#ifndef PAGELLM_WORKER_SERVER_VLLM_METRICS_H_
#define PAGELLM_WORKER_SERVER_VLLM_METRICS_H_

#include <memory>
#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace pagellm {

class VllmMetricsView final : public prometheus::Collectable {
 public:
  // `source` is the worker's registry (WorkerMetrics::registry()).
  VllmMetricsView(std::shared_ptr<const prometheus::Registry> source, std::string model_name);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::shared_ptr<const prometheus::Registry> source_;
  const std::string model_name_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_SERVER_VLLM_METRICS_H_
