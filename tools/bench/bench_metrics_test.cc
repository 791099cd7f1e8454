#include "tools/bench/bench_metrics.h"

#include <vector>

#include "gtest/gtest.h"

namespace pagellm::bench {
namespace {

constexpr int64_t kMs = 1'000'000;

RequestRecord Ok(int32_t prompt_len, int64_t send_ms, std::vector<int64_t> tokens_ms,
                 int64_t end_ms) {
  RequestRecord r;
  r.prompt_len = prompt_len;
  r.send_ns = send_ms * kMs;
  for (int64_t t : tokens_ms) r.token_ns.push_back(t * kMs);
  r.end_ns = end_ms * kMs;
  r.code = absl::StatusCode::kOk;
  return r;
}

RequestRecord Failed(absl::StatusCode code, int64_t send_ms, int64_t end_ms) {
  RequestRecord r;
  r.prompt_len = 7;
  r.send_ns = send_ms * kMs;
  r.end_ns = end_ms * kMs;
  r.code = code;
  r.error = "worker gone";
  return r;
}

TEST(PercentileTest, InterpolatesLinearlyLikeNumpy) {
  const std::vector<double> a = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(a, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(a, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(a, 90), 3.7);
  EXPECT_DOUBLE_EQ(Percentile(a, 99), 3.97);
  EXPECT_DOUBLE_EQ(Percentile(a, 100), 4);
  // np.percentile([15, 20, 35, 40, 50], 40) == 29.0
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{15, 20, 35, 40, 50}, 40), 29);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{}, 50), 0);
}

TEST(SummarizeTest, SortsAndUsesPopulationStd) {
  const LatencyStats s = Summarize({100, 30, 60});
  EXPECT_NEAR(s.mean_ms, 63.3333333, 1e-6);
  EXPECT_DOUBLE_EQ(s.median_ms, 60);
  EXPECT_DOUBLE_EQ(s.p90_ms, 92);
  EXPECT_DOUBLE_EQ(s.p99_ms, 99.2);
  EXPECT_NEAR(s.std_ms, 28.6744175, 1e-6);  // np.std([100, 30, 60])
  const LatencyStats empty = Summarize({});
  EXPECT_EQ(empty.mean_ms, 0);
  EXPECT_EQ(empty.p99_ms, 0);
}

// A hand-computed run of 200 ms: three successes (one of them sends a 3-token message, one
// produces a single token) and one failure.
class BenchMetricsTest : public ::testing::Test {
 protected:
  std::vector<RequestRecord> records_ = {
      Ok(10, 0, {100, 110, 130}, 140),     // TTFT 100, TPOT 20, ITL 10 20, E2E 140
      Ok(20, 50, {80, 80, 80, 120}, 120),  // TTFT 30, TPOT 40/3, ITL 0 0 40, E2E 70
      Failed(absl::StatusCode::kUnavailable, 10, 20),
      Ok(5, 0, {60}, 60),  // TTFT 60, no TPOT or ITL, E2E 60
  };
  BenchMetrics m_ = ComputeMetrics(records_, 0.2);
};

TEST_F(BenchMetricsTest, CountsOnlySuccessfulRequestsTokens) {
  EXPECT_EQ(m_.completed, 3);
  EXPECT_EQ(m_.failed, 1);
  EXPECT_EQ(m_.total_input_tokens, 35);
  EXPECT_EQ(m_.total_output_tokens, 8);
  EXPECT_DOUBLE_EQ(m_.request_throughput, 15);
  EXPECT_DOUBLE_EQ(m_.output_throughput, 40);
  EXPECT_DOUBLE_EQ(m_.total_token_throughput, 215);
}

TEST_F(BenchMetricsTest, TtftTpotItlE2el) {
  EXPECT_NEAR(m_.ttft.mean_ms, 190.0 / 3, 1e-9);
  EXPECT_NEAR(m_.ttft.median_ms, 60, 1e-9);
  EXPECT_NEAR(m_.ttft.p99_ms, 99.2, 1e-9);
  EXPECT_NEAR(m_.tpot.mean_ms, (20 + 40.0 / 3) / 2, 1e-9);
  EXPECT_NEAR(m_.tpot.median_ms, (20 + 40.0 / 3) / 2, 1e-9);
  // ITL sample {10, 20, 0, 0, 40}: the tokens of one message arrive together.
  EXPECT_NEAR(m_.itl.mean_ms, 14, 1e-9);
  EXPECT_NEAR(m_.itl.median_ms, 10, 1e-9);
  EXPECT_NEAR(m_.itl.p90_ms, 32, 1e-9);
  EXPECT_NEAR(m_.itl.p95_ms, 36, 1e-9);
  EXPECT_NEAR(m_.itl.p99_ms, 39.2, 1e-9);
  EXPECT_NEAR(m_.e2el.mean_ms, 90, 1e-9);
  EXPECT_NEAR(m_.e2el.median_ms, 70, 1e-9);
}

TEST_F(BenchMetricsTest, ErrorsByCodeAndPeakConcurrency) {
  ASSERT_EQ(m_.errors_by_code.size(), 1u);
  EXPECT_EQ(m_.errors_by_code.at("UNAVAILABLE"), 1);
  EXPECT_EQ(m_.error_examples.at("UNAVAILABLE"), "worker gone");
  EXPECT_EQ(m_.peak_concurrency, 3);  // 10-20 ms: the first, the failure and the last
}

TEST(BenchMetricsEdgeTest, BackToBackRequestsDoNotOverlap) {
  const std::vector<RequestRecord> r = {Ok(1, 0, {5}, 10), Ok(1, 10, {15}, 20)};
  EXPECT_EQ(ComputeMetrics(r, 0.02).peak_concurrency, 1);
}

TEST(BenchMetricsEdgeTest, AllFailedGivesZeroStatistics) {
  const std::vector<RequestRecord> r = {Failed(absl::StatusCode::kDeadlineExceeded, 0, 5)};
  const BenchMetrics m = ComputeMetrics(r, 1.0);
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.ttft.mean_ms, 0);
  EXPECT_EQ(m.itl.p99_ms, 0);
  EXPECT_EQ(m.errors_by_code.at("DEADLINE_EXCEEDED"), 1);
}

}  // namespace
}  // namespace pagellm::bench
