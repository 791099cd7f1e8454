#include "tools/bench/bench_report.h"

#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm::bench {
namespace {

using ::testing::HasSubstr;

class BenchReportTest : public ::testing::Test {
 protected:
  BenchReportTest() {
    info_.server = "127.0.0.1:50061";
    info_.endpoint = "worker";
    info_.model = "m";
    info_.dataset = "random";
    info_.num_prompts = 2;
    info_.request_rate = std::numeric_limits<double>::infinity();
    RequestRecord ok;
    ok.prompt_len = 4;
    ok.send_ns = 0;
    ok.token_ns = {1'000'000, 3'000'000};
    ok.end_ns = 3'000'000;
    ok.code = absl::StatusCode::kOk;
    RequestRecord bad;
    bad.prompt_len = 4;
    bad.send_ns = 0;
    bad.end_ns = 1'000'000;
    bad.code = absl::StatusCode::kResourceExhausted;
    bad.error = "queue full";
    records_ = {ok, bad};
    metrics_ = ComputeMetrics(records_, 0.5);
  }

  RunInfo info_;
  std::vector<RequestRecord> records_;
  BenchMetrics metrics_;
};

TEST_F(BenchReportTest, TableHasVllmLines) {
  const std::string t = FormatReport(info_, metrics_);
  EXPECT_THAT(t, HasSubstr("Successful requests:                     1\n"));
  EXPECT_THAT(t, HasSubstr("Failed requests:                         1\n"));
  EXPECT_THAT(t, HasSubstr("Benchmark duration (s):                  0.50\n"));
  EXPECT_THAT(t, HasSubstr("Output token throughput (tok/s):         4.00\n"));
  EXPECT_THAT(t, HasSubstr("Mean TTFT (ms):                          1.00\n"));
  EXPECT_THAT(t, HasSubstr("P99 ITL (ms):                            2.00\n"));
  EXPECT_THAT(t, HasSubstr("Traffic request rate:                    inf\n"));
  EXPECT_THAT(t, HasSubstr("RESOURCE_EXHAUSTED:"));
  EXPECT_THAT(t, HasSubstr("queue full"));
}

TEST_F(BenchReportTest, JsonUsesVllmKeys) {
  const nlohmann::json j = ReportJson(info_, metrics_);
  EXPECT_EQ(j["completed"], 1);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_EQ(j["max_concurrency"], nullptr);
  EXPECT_DOUBLE_EQ(j["duration"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["mean_ttft_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["median_itl_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["p99_tpot_ms"].get<double>(), 2.0);
  EXPECT_TRUE(j.contains("std_e2el_ms"));
  EXPECT_EQ(j["errors_by_code"]["RESOURCE_EXHAUSTED"], 1);
  EXPECT_FALSE(j.contains("itls"));
}

TEST_F(BenchReportTest, DetailedJsonHasPerRequestArrays) {
  const nlohmann::json j = ReportJson(info_, metrics_, records_);
  EXPECT_EQ(j["input_lens"], nlohmann::json({4, 4}));
  EXPECT_EQ(j["output_lens"], nlohmann::json({2, 0}));
  EXPECT_DOUBLE_EQ(j["ttfts"][0].get<double>(), 0.001);
  EXPECT_DOUBLE_EQ(j["itls"][0][0].get<double>(), 0.002);
  EXPECT_EQ(j["itls"][1].size(), 0u);
  EXPECT_EQ(j["errors"][0], "");
  EXPECT_EQ(j["errors"][1], "RESOURCE_EXHAUSTED: queue full");
}

}  // namespace
}  // namespace pagellm::bench
