#include "worker/server/vllm_metrics.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace pagellm {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// One source family's series under a vLLM name. Series that end up with the same labels under
// the same name are added up (counters, gauges, histograms alike).
struct Rule {
  std::string_view to;    // vLLM's name as Prometheus sees it (counters end in _total)
  std::string_view from;  // the worker's family (worker_metrics.cc)
  // Keep only the series whose label `only` is `only_value`, without that label.
  std::string_view only = {}, only_value = {};
  std::string_view drop = {};                       // a label removed (its series add up)
  std::string_view rename = {}, renamed = {};       // a label renamed
  std::string_view add_label = {}, add_value = {};  // a label added
};

// vLLM 0.32's V1 engine metrics with a pagellm counterpart. Meanings match vLLM's except:
// - prompt tokens computed include prefill recomputed after a recompute preemption (vLLM counts
//   a request's prompt once);
// - finished reasons are stop, length, abort and error (vLLM's, less "repetition");
// - the histograms' buckets are pagellm's (dashboards take quantiles, which do not depend on
//   matching buckets).
constexpr Rule kRules[] = {
    {.to = "vllm:num_requests_running", .from = "pagellm_requests_running"},
    {.to = "vllm:num_requests_waiting", .from = "pagellm_requests_waiting"},
    {.to = "vllm:kv_cache_usage_perc",
     .from = "pagellm_kv_cache_usage_ratio",
     .only = "pool",
     .only_value = "device"},
    {.to = "vllm:num_preemptions_total", .from = "pagellm_preemptions_total", .drop = "mode"},
    // All prompt tokens: computed, and served from the prefix cache.
    {.to = "vllm:prompt_tokens_total", .from = "pagellm_prompt_tokens_total"},
    {.to = "vllm:prompt_tokens_total", .from = "pagellm_prefix_cache_hit_tokens_total"},
    {.to = "vllm:prompt_tokens_by_source_total",
     .from = "pagellm_prompt_tokens_total",
     .add_label = "source",
     .add_value = "local_compute"},
    {.to = "vllm:prompt_tokens_by_source_total",
     .from = "pagellm_prefix_cache_hit_tokens_total",
     .add_label = "source",
     .add_value = "local_cache_hit"},
    {.to = "vllm:prompt_tokens_cached_total", .from = "pagellm_prefix_cache_hit_tokens_total"},
    {.to = "vllm:generation_tokens_total", .from = "pagellm_generation_tokens_total"},
    {.to = "vllm:request_success_total",
     .from = "pagellm_requests_finished_total",
     .rename = "reason",
     .renamed = "finished_reason"},
    {.to = "vllm:prefix_cache_queries_total", .from = "pagellm_prefix_cache_queried_tokens_total"},
    {.to = "vllm:prefix_cache_hits_total", .from = "pagellm_prefix_cache_hit_tokens_total"},
    {.to = "vllm:spec_decode_num_draft_tokens_total",
     .from = "pagellm_spec_decode_draft_tokens_total"},
    {.to = "vllm:spec_decode_num_accepted_tokens_total",
     .from = "pagellm_spec_decode_accepted_tokens_total"},
    {.to = "vllm:time_to_first_token_seconds", .from = "pagellm_time_to_first_token_seconds"},
    {.to = "vllm:inter_token_latency_seconds", .from = "pagellm_inter_token_latency_seconds"},
    {.to = "vllm:e2e_request_latency_seconds", .from = "pagellm_e2e_request_latency_seconds"},
    {.to = "vllm:request_queue_time_seconds", .from = "pagellm_queue_time_seconds"},
    {.to = "vllm:request_prefill_time_seconds", .from = "pagellm_request_prefill_time_seconds"},
    {.to = "vllm:request_decode_time_seconds", .from = "pagellm_request_decode_time_seconds"},
    {.to = "vllm:request_inference_time_seconds", .from = "pagellm_request_inference_time_seconds"},
    {.to = "vllm:request_time_per_output_token_seconds",
     .from = "pagellm_request_time_per_output_token_seconds"},
    {.to = "vllm:request_prompt_tokens", .from = "pagellm_request_prompt_tokens"},
    {.to = "vllm:request_generation_tokens", .from = "pagellm_request_generation_tokens"},
    {.to = "vllm:request_params_n", .from = "pagellm_request_params_n"},
    {.to = "vllm:request_params_max_tokens", .from = "pagellm_request_params_max_tokens"},
    {.to = "vllm:iteration_tokens_total", .from = "pagellm_iteration_tokens"},
};

// Adds `m`'s value into `into` (same type, same labels).
void AddInto(MetricType type, const ClientMetric& m, ClientMetric* into) {
  switch (type) {
    case MetricType::Counter:
      into->counter.value += m.counter.value;
      break;
    case MetricType::Gauge:
      into->gauge.value += m.gauge.value;
      break;
    case MetricType::Histogram: {
      // Same family, same boundaries: the buckets line up.
      auto& h = into->histogram;
      h.sample_count += m.histogram.sample_count;
      h.sample_sum += m.histogram.sample_sum;
      for (size_t i = 0; i < h.bucket.size() && i < m.histogram.bucket.size(); ++i) {
        h.bucket[i].cumulative_count += m.histogram.bucket[i].cumulative_count;
      }
      break;
    }
    default:
      break;
  }
}

}  // namespace

VllmMetricsView::VllmMetricsView(std::shared_ptr<const prometheus::Registry> source,
                                 std::string model_name)
    : source_(std::move(source)), model_name_(std::move(model_name)) {}

std::vector<MetricFamily> VllmMetricsView::Collect() const {
  const std::vector<MetricFamily> source = source_->Collect();
  absl::flat_hash_map<std::string_view, const MetricFamily*> by_name;
  for (const MetricFamily& f : source) by_name[f.name] = &f;

  std::vector<MetricFamily> out;
  absl::flat_hash_map<std::string_view, size_t> out_index;  // vLLM name -> out[i]
  for (const Rule& rule : kRules) {
    auto found = by_name.find(rule.from);
    if (found == by_name.end()) continue;
    const MetricFamily& from = *found->second;
    auto [slot, inserted] = out_index.try_emplace(rule.to, out.size());
    if (inserted) {
      MetricFamily f;
      f.name = std::string(rule.to);
      f.help = absl::StrCat(from.help, " (pagellm: ", from.name, ")");
      f.type = from.type;
      out.push_back(std::move(f));
    }
    MetricFamily& to = out[slot->second];
    if (to.type != from.type) continue;  // a rule table mistake; the test catches it
    for (const ClientMetric& m : from.metric) {
      ClientMetric series = m;
      series.label = {{"model_name", model_name_}, {"engine", "0"}};
      bool keep = rule.only.empty();
      for (const ClientMetric::Label& l : m.label) {
        if (l.name == rule.only) {
          keep = l.value == rule.only_value;
        } else if (l.name == rule.drop) {
          continue;
        } else if (l.name == rule.rename) {
          series.label.push_back({std::string(rule.renamed), l.value});
        } else {
          series.label.push_back(l);
        }
      }
      if (!keep) continue;
      if (!rule.add_label.empty()) {
        series.label.push_back({std::string(rule.add_label), std::string(rule.add_value)});
      }
      auto same = std::find_if(to.metric.begin(), to.metric.end(),
                               [&](const ClientMetric& c) { return c.label == series.label; });
      if (same == to.metric.end()) {
        to.metric.push_back(std::move(series));
      } else {
        AddInto(to.type, series, &*same);
      }
    }
  }
  return out;
}

}  // namespace pagellm
