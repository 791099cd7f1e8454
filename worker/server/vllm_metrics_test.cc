// VllmMetricsView against vLLM's own definitions: tests/data/metrics/vllm_metrics.json, read by
// tools/fixtures/make_vllm_metrics_fixture.py from the source of the vLLM wheel (0.32.0).
#include "worker/server/vllm_metrics.h"

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prometheus/text_serializer.h"
#include "worker/server/worker_metrics.h"

namespace pagellm {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

constexpr char kFixture[] = "tests/data/metrics/vllm_metrics.json";

nlohmann::json VllmMetrics() {
  std::ifstream in(kFixture);
  EXPECT_TRUE(in.good()) << kFixture;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object() && j.contains("metrics")) << kFixture;
  return j.is_object() && j.contains("metrics") ? j["metrics"] : nlohmann::json::object();
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Histogram:
      return "histogram";
    default:
      return "other";
  }
}

// The series of `name` whose labels include `want` (model_name and engine aside).
const ClientMetric* Series(const std::vector<MetricFamily>& families, const std::string& name,
                           const std::map<std::string, std::string>& want = {}) {
  for (const MetricFamily& f : families) {
    if (f.name != name) continue;
    for (const ClientMetric& m : f.metric) {
      int matched = 0;
      for (const ClientMetric::Label& l : m.label) {
        auto it = want.find(l.name);
        if (it != want.end() && it->second == l.value) ++matched;
      }
      if (matched == static_cast<int>(want.size())) return &m;
    }
  }
  ADD_FAILURE() << "no series " << name;
  return nullptr;
}

class VllmMetricsTest : public ::testing::Test {
 protected:
  WorkerMetrics metrics_{/*max_model_len=*/2048};
  VllmMetricsView view_{metrics_.registry(), "my-model"};
};

TEST_F(VllmMetricsTest, EveryFamilyIsOneOfVllmsWithItsTypeAndLabels) {
  const nlohmann::json vllm = VllmMetrics();
  ASSERT_FALSE(vllm.empty());
  const std::vector<MetricFamily> families = view_.Collect();
  ASSERT_FALSE(families.empty());
  for (const MetricFamily& f : families) {
    SCOPED_TRACE(f.name);
    // prometheus_client adds "_total" to a counter's name; vLLM's code names it without.
    std::string code_name = f.name;
    if (f.type == MetricType::Counter) {
      ASSERT_TRUE(absl::EndsWith(code_name, "_total"));
      code_name.resize(code_name.size() - 6);
    }
    ASSERT_TRUE(vllm.contains(code_name)) << "vLLM has no metric " << code_name;
    const nlohmann::json& def = vllm[code_name];
    EXPECT_EQ(def["type"], TypeName(f.type));
    ASSERT_FALSE(f.metric.empty());
    for (const ClientMetric& m : f.metric) {
      std::vector<std::string> labels;
      for (const ClientMetric::Label& l : m.label) labels.push_back(l.name);
      EXPECT_EQ(nlohmann::json(labels), def["labels"]);
    }
  }
}

TEST_F(VllmMetricsTest, ItCoversWhatVllmDashboardsAndAutoscalersRead) {
  std::set<std::string> names;
  for (const MetricFamily& f : view_.Collect()) names.insert(f.name);
  const std::set<std::string> expected = {
      // scheduler state (what autoscalers read)
      "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
      // counters
      "vllm:num_preemptions_total", "vllm:prompt_tokens_total",
      "vllm:prompt_tokens_by_source_total", "vllm:prompt_tokens_cached_total",
      "vllm:generation_tokens_total", "vllm:request_success_total",
      "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
      "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total",
      // latency histograms
      "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
      "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
      "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
      "vllm:request_inference_time_seconds", "vllm:request_time_per_output_token_seconds",
      // size histograms
      "vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:request_params_n",
      "vllm:request_params_max_tokens", "vllm:iteration_tokens_total"};
  EXPECT_EQ(names, expected);
}

TEST_F(VllmMetricsTest, ValuesAreTheWorkersUnderVllmsNamesAndMeanings) {
  metrics_.device.usage_ratio->Set(0.25);
  metrics_.swap.usage_ratio->Set(0.75);
  metrics_.requests_waiting->Set(3);
  metrics_.preemptions_swap->Increment(2);
  metrics_.preemptions_recompute->Increment(3);
  metrics_.prompt_tokens->Increment(100);
  metrics_.prefix_cache_hit_tokens->Increment(28);
  metrics_.prefix_cache_queried_tokens->Increment(150);
  metrics_.finished_stop->Increment(4);
  metrics_.finished_length->Increment(1);
  metrics_.time_to_first_token->Observe(0.1);
  metrics_.time_to_first_token->Observe(0.3);
  const std::vector<MetricFamily> f = view_.Collect();

  // The device pool's usage, not the swap pool's (vLLM's KV cache is the GPU's).
  const ClientMetric* usage = Series(f, "vllm:kv_cache_usage_perc");
  ASSERT_NE(usage, nullptr);
  EXPECT_DOUBLE_EQ(usage->gauge.value, 0.25);
  for (const MetricFamily& family : f) {
    if (family.name == "vllm:kv_cache_usage_perc") {
      EXPECT_EQ(family.metric.size(), 1u);
    }
  }
  EXPECT_DOUBLE_EQ(Series(f, "vllm:num_requests_waiting")->gauge.value, 3);
  // Preemptions of both modes; prompt tokens computed plus those served from the cache.
  EXPECT_DOUBLE_EQ(Series(f, "vllm:num_preemptions_total")->counter.value, 5);
  EXPECT_DOUBLE_EQ(Series(f, "vllm:prompt_tokens_total")->counter.value, 128);
  EXPECT_DOUBLE_EQ(
      Series(f, "vllm:prompt_tokens_by_source_total", {{"source", "local_compute"}})->counter.value,
      100);
  EXPECT_DOUBLE_EQ(Series(f, "vllm:prompt_tokens_by_source_total", {{"source", "local_cache_hit"}})
                       ->counter.value,
                   28);
  EXPECT_DOUBLE_EQ(Series(f, "vllm:prompt_tokens_cached_total")->counter.value, 28);
  EXPECT_DOUBLE_EQ(Series(f, "vllm:prefix_cache_queries_total")->counter.value, 150);
  EXPECT_DOUBLE_EQ(Series(f, "vllm:prefix_cache_hits_total")->counter.value, 28);
  EXPECT_DOUBLE_EQ(
      Series(f, "vllm:request_success_total", {{"finished_reason", "stop"}})->counter.value, 4);
  EXPECT_DOUBLE_EQ(
      Series(f, "vllm:request_success_total", {{"finished_reason", "length"}})->counter.value, 1);
  const ClientMetric* ttft = Series(f, "vllm:time_to_first_token_seconds");
  ASSERT_NE(ttft, nullptr);
  EXPECT_EQ(ttft->histogram.sample_count, 2u);
  EXPECT_DOUBLE_EQ(ttft->histogram.sample_sum, 0.4);
  EXPECT_EQ(ttft->histogram.bucket.back().cumulative_count, 2u);
  // Every series: the served name and engine 0.
  for (const MetricFamily& family : f) {
    for (const ClientMetric& m : family.metric) {
      ASSERT_GE(m.label.size(), 2u) << family.name;
      EXPECT_EQ(m.label[0].name, "model_name");
      EXPECT_EQ(m.label[0].value, "my-model");
      EXPECT_EQ(m.label[1].name, "engine");
      EXPECT_EQ(m.label[1].value, "0");
    }
  }
}

TEST_F(VllmMetricsTest, TheWorkersOwnMetricsAreLeftAsTheyWere) {
  metrics_.preemptions_swap->Increment(2);
  const size_t before = metrics_.registry()->Collect().size();
  (void)view_.Collect();
  const std::vector<MetricFamily> after = metrics_.registry()->Collect();
  EXPECT_EQ(after.size(), before);
  for (const MetricFamily& family : after) {
    EXPECT_FALSE(absl::StartsWith(family.name, "vllm:"));
    if (family.name != "pagellm_preemptions_total") continue;
    EXPECT_EQ(family.metric.size(), 2u);  // swap and recompute, still apart
  }
}

TEST_F(VllmMetricsTest, TheTextExpositionIsWhatPrometheusScrapesFromVllm) {
  VllmMetricsView quoted(metrics_.registry(), "team \"a\"/llama");
  metrics_.requests_running->Set(7);
  const std::string text = prometheus::TextSerializer().Serialize(quoted.Collect());
  EXPECT_TRUE(absl::StrContains(text, "# TYPE vllm:num_requests_running gauge\n")) << text;
  EXPECT_TRUE(absl::StrContains(
      text, "vllm:num_requests_running{model_name=\"team \\\"a\\\"/llama\",engine=\"0\"} 7"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "# TYPE vllm:request_success_total counter\n"));
  EXPECT_TRUE(absl::StrContains(
      text,
      "vllm:time_to_first_token_seconds_bucket{model_name=\"team \\\"a\\\"/llama\","
      "engine=\"0\",le=\"+Inf\"} 0"));
}

}  // namespace
}  // namespace pagellm
