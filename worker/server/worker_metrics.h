// WorkerMetrics: the worker's Prometheus metrics (names as in the README; no per-request or
// per-user labels). prometheus-cpp metrics are atomic, so any thread may update them; the engine
// thread does.
#ifndef PAGELLM_WORKER_SERVER_WORKER_METRICS_H_
#define PAGELLM_WORKER_SERVER_WORKER_METRICS_H_

#include <memory>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace pagellm {

class WorkerMetrics {
 public:
  WorkerMetrics();
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  // What /metrics exposes.
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  struct Pool {
    prometheus::Gauge* usage_ratio;
    prometheus::Gauge* blocks_used;
    prometheus::Gauge* blocks_capacity;
  };
  Pool device, swap;  // the pool="device" and pool="swap" series
  prometheus::Gauge* requests_running;
  prometheus::Gauge* requests_waiting;
  prometheus::Gauge* requests_swapped;
  prometheus::Counter* preemptions_swap;
  prometheus::Counter* preemptions_recompute;
  prometheus::Counter* prompt_tokens;
  prometheus::Counter* generation_tokens;
  prometheus::Counter* finished_stop;
  prometheus::Counter* finished_length;
  prometheus::Counter* finished_abort;
  prometheus::Counter* finished_error;
  prometheus::Counter* prefix_cache_queried_tokens;
  prometheus::Counter* prefix_cache_hit_tokens;
  prometheus::Counter* structured_masks_computed;
  prometheus::Counter* structured_masks_cached;
  prometheus::Counter* structured_mask_seconds;
  prometheus::Counter* lora_slot_loads;
  prometheus::Counter* lora_adapter_reads;
  prometheus::Counter* spec_draft_tokens;
  prometheus::Counter* spec_accepted_tokens;
  // pagellm_lora_requests_total{adapter}: requests admitted with each LoRA adapter. Labels are
  // the served adapter names only (--lora-modules, bounded), never what a client sent.
  prometheus::Family<prometheus::Counter>* lora_requests;
  prometheus::Histogram* time_to_first_token;
  prometheus::Histogram* inter_token_latency;
  prometheus::Histogram* e2e_request_latency;
  prometheus::Histogram* queue_time;
  prometheus::Gauge* tensor_parallel_size;
  prometheus::Histogram* collective_seconds;  // per engine step, tensor-parallel groups only

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_SERVER_WORKER_METRICS_H_
