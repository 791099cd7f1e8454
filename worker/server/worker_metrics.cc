#include "worker/server/worker_metrics.h"

#include "prometheus/family.h"

namespace pagellm {
namespace {

using prometheus::Histogram;

Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.25, 0.5,
          0.75,  1.0,    2.5,   5.0,  7.5,   10.0, 20.0,  40.0, 80.0, 160.0};
}

// 1, 2, 5, 10, 20, 50, ... up to `max` (at least one bucket).
Histogram::BucketBoundaries OneTwoFiveBuckets(int64_t max) {
  Histogram::BucketBoundaries b;
  for (int64_t decade = 1;; decade *= 10) {
    for (int64_t m : {1, 2, 5}) {
      if (m * decade > max && !b.empty()) return b;
      b.push_back(static_cast<double>(m * decade));
    }
  }
}

}  // namespace

WorkerMetrics::WorkerMetrics(int64_t max_model_len)
    : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  auto& usage = prometheus::BuildGauge()
                    .Name("pagellm_kv_cache_usage_ratio")
                    .Help("Fraction of KV cache blocks held by sequences (1 = full)")
                    .Register(r);
  auto& used = prometheus::BuildGauge()
                   .Name("pagellm_kv_cache_blocks_used")
                   .Help("KV cache blocks held by sequences")
                   .Register(r);
  auto& capacity = prometheus::BuildGauge()
                       .Name("pagellm_kv_cache_blocks_capacity")
                       .Help("KV cache blocks in the pool")
                       .Register(r);
  for (auto [pool, name] : {std::pair<Pool*, const char*>{&device, "device"}, {&swap, "swap"}}) {
    pool->usage_ratio = &usage.Add({{"pool", name}});
    pool->blocks_used = &used.Add({{"pool", name}});
    pool->blocks_capacity = &capacity.Add({{"pool", name}});
  }
  requests_running = &prometheus::BuildGauge()
                          .Name("pagellm_requests_running")
                          .Help("Requests whose sequences are running")
                          .Register(r)
                          .Add({});
  requests_waiting = &prometheus::BuildGauge()
                          .Name("pagellm_requests_waiting")
                          .Help("Requests waiting for admission")
                          .Register(r)
                          .Add({});
  requests_swapped = &prometheus::BuildGauge()
                          .Name("pagellm_requests_swapped")
                          .Help("Requests swapped out to the swap pool")
                          .Register(r)
                          .Add({});
  auto& preemptions = prometheus::BuildCounter()
                          .Name("pagellm_preemptions_total")
                          .Help("Sequence groups preempted, by mode")
                          .Register(r);
  preemptions_swap = &preemptions.Add({{"mode", "swap"}});
  preemptions_recompute = &preemptions.Add({{"mode", "recompute"}});
  prompt_tokens = &prometheus::BuildCounter()
                       .Name("pagellm_prompt_tokens_total")
                       .Help("Prompt tokens computed (prefill, recomputation included)")
                       .Register(r)
                       .Add({});
  generation_tokens = &prometheus::BuildCounter()
                           .Name("pagellm_generation_tokens_total")
                           .Help("Tokens generated")
                           .Register(r)
                           .Add({});
  auto& finished = prometheus::BuildCounter()
                       .Name("pagellm_requests_finished_total")
                       .Help("Requests finished, by reason")
                       .Register(r);
  finished_stop = &finished.Add({{"reason", "stop"}});
  finished_length = &finished.Add({{"reason", "length"}});
  finished_abort = &finished.Add({{"reason", "abort"}});
  finished_error = &finished.Add({{"reason", "error"}});
  prefix_cache_queried_tokens = &prometheus::BuildCounter()
                                     .Name("pagellm_prefix_cache_queried_tokens_total")
                                     .Help("Prompt tokens looked up in the prefix cache")
                                     .Register(r)
                                     .Add({});
  prefix_cache_hit_tokens = &prometheus::BuildCounter()
                                 .Name("pagellm_prefix_cache_hit_tokens_total")
                                 .Help("Prompt tokens served from the prefix cache")
                                 .Register(r)
                                 .Add({});
  auto& masks = prometheus::BuildCounter()
                    .Name("pagellm_structured_output_masks_total")
                    .Help(
                        "Structured-output token masks: computed (a vocabulary walk) or "
                        "served from a grammar's cache")
                    .Register(r);
  structured_masks_computed = &masks.Add({{"source", "computed"}});
  structured_masks_cached = &masks.Add({{"source", "cached"}});
  structured_mask_seconds = &prometheus::BuildCounter()
                                 .Name("pagellm_structured_output_mask_seconds_total")
                                 .Help("Engine-thread time spent making structured-output masks")
                                 .Register(r)
                                 .Add({});
  lora_slot_loads = &prometheus::BuildCounter()
                         .Name("pagellm_lora_slot_loads_total")
                         .Help(
                             "LoRA adapters put into a backend slot (on a GPU: uploaded) because "
                             "a step needed them (--max-cpu-loras above --max-loras)")
                         .Register(r)
                         .Add({});
  lora_adapter_reads = &prometheus::BuildCounter()
                            .Name("pagellm_lora_adapter_reads_total")
                            .Help(
                                "LoRA adapters read again from their directories because a "
                                "request needed one whose host copy was let go (more served "
                                "than --max-cpu-loras)")
                            .Register(r)
                            .Add({});
  spec_draft_tokens = &prometheus::BuildCounter()
                           .Name("pagellm_spec_decode_draft_tokens_total")
                           .Help("Speculated (n-gram) tokens the model checked")
                           .Register(r)
                           .Add({});
  spec_accepted_tokens = &prometheus::BuildCounter()
                              .Name("pagellm_spec_decode_accepted_tokens_total")
                              .Help("Speculated tokens the model confirmed")
                              .Register(r)
                              .Add({});
  time_to_first_token = &prometheus::BuildHistogram()
                             .Name("pagellm_time_to_first_token_seconds")
                             .Help("Time from arrival at the worker to the first token")
                             .Register(r)
                             .Add({}, LatencyBuckets());
  inter_token_latency = &prometheus::BuildHistogram()
                             .Name("pagellm_inter_token_latency_seconds")
                             .Help("Time between a request's consecutive outputs")
                             .Register(r)
                             .Add({}, LatencyBuckets());
  e2e_request_latency = &prometheus::BuildHistogram()
                             .Name("pagellm_e2e_request_latency_seconds")
                             .Help("Time from arrival at the worker to the last token")
                             .Register(r)
                             .Add({}, LatencyBuckets());
  queue_time = &prometheus::BuildHistogram()
                    .Name("pagellm_queue_time_seconds")
                    .Help("Time from arrival at the worker to the first scheduled step")
                    .Register(r)
                    .Add({}, LatencyBuckets());
  auto histogram = [&r](const char* name, const char* help, Histogram::BucketBoundaries buckets) {
    return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, buckets);
  };
  const Histogram::BucketBoundaries tokens = OneTwoFiveBuckets(max_model_len);
  request_prompt_tokens =
      histogram("pagellm_request_prompt_tokens", "Prompt tokens of each finished request", tokens);
  request_generation_tokens = histogram("pagellm_request_generation_tokens",
                                        "Tokens generated for each finished request", tokens);
  request_params_n =
      histogram("pagellm_request_params_n", "The n (parallel samples) of each finished request",
                {1, 2, 5, 10, 20});
  request_params_max_tokens = histogram("pagellm_request_params_max_tokens",
                                        "The max_tokens of each finished request", tokens);
  request_prefill_time =
      histogram("pagellm_request_prefill_time_seconds",
                "Time from a request's first scheduled step to its first token", LatencyBuckets());
  request_decode_time =
      histogram("pagellm_request_decode_time_seconds",
                "Time from a request's first token to its last", LatencyBuckets());
  request_inference_time =
      histogram("pagellm_request_inference_time_seconds",
                "Time from a request's first scheduled step to its last token", LatencyBuckets());
  request_time_per_output_token =
      histogram("pagellm_request_time_per_output_token_seconds",
                "A request's decode time per token generated after its first", LatencyBuckets());
  iteration_tokens =
      histogram("pagellm_iteration_tokens", "Tokens an engine step computed (prompt and generated)",
                {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384});
  lora_requests = &prometheus::BuildCounter()
                       .Name("pagellm_lora_requests_total")
                       .Help("Requests admitted with each LoRA adapter")
                       .Register(r);
  tensor_parallel_size = &prometheus::BuildGauge()
                              .Name("pagellm_tensor_parallel_size")
                              .Help("Ranks of the worker's tensor-parallel group (1: one device)")
                              .Register(r)
                              .Add({});
  tensor_parallel_size->Set(1);
  collective_seconds =
      &prometheus::BuildHistogram()
           .Name("pagellm_collective_seconds")
           .Help("Time an engine step spent in tensor-parallel collectives")
           .Register(r)
           .Add({}, Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0});
}

}  // namespace pagellm
