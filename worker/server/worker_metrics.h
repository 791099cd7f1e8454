// WorkerMetrics: the worker's Prometheus metrics (names as in the README; no per-request or
// per-user labels). prometheus-cpp metrics are atomic, so any thread may update them; the engine
// thread does.
#ifndef PAGELLM_WORKER_SERVER_WORKER_METRICS_H_
#define PAGELLM_WORKER_SERVER_WORKER_METRICS_H_

#include <cstdint>
#include <memory>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace pagellm {

class WorkerMetrics {
 public:
  // `max_model_len` bounds the buckets of the per-request token histograms (1, 2, 5, 10, 20, ...
  // up to it, as vLLM's).
  explicit WorkerMetrics(int64_t max_model_len = 8192);
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
  // Per request, observed when it ends with OK (as vLLM's, whose names they follow): its prompt
  // and generated tokens (those this worker generated), its n and max_tokens; the time from its
  // first scheduled step to its first token (prefill), from there to its last (decode), both
  // (inference), and decode time per generated token after the first.
  prometheus::Histogram* request_prompt_tokens;
  prometheus::Histogram* request_generation_tokens;
  prometheus::Histogram* request_params_n;
  prometheus::Histogram* request_params_max_tokens;
  prometheus::Histogram* request_prefill_time;
  prometheus::Histogram* request_decode_time;
  prometheus::Histogram* request_inference_time;
  prometheus::Histogram* request_time_per_output_token;
  prometheus::Histogram* iteration_tokens;  // per engine step: prompt + generated tokens
  prometheus::Gauge* tensor_parallel_size;
  prometheus::Histogram* collective_seconds;  // per engine step, tensor-parallel groups only

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_SERVER_WORKER_METRICS_H_
