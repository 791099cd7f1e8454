#include "tools/simulate/trace.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <tuple>

#include "gtest/gtest.h"

namespace pagellm::sim {
namespace {

constexpr int64_t kMany = 20000;

TraceOptions Options(double rate, int64_t n = kMany, int64_t max_len = 2048) {
  TraceOptions o;
  o.num_requests = n;
  o.request_rate = rate;
  o.seed = 7;
  o.max_len = max_len;
  return o;
}

struct Means {
  double input = 0, output = 0;
};

Means MeansOf(const std::vector<TraceRequest>& t) {
  Means m;
  for (const TraceRequest& r : t) m.input += r.input_len, m.output += r.output_len;
  m.input /= static_cast<double>(t.size());
  m.output /= static_cast<double>(t.size());
  return m;
}

// Table-driven: both workloads hit the paper's means within 3% after clipping.
TEST(TraceTest, SyntheticMeansMatchThePaper) {
  for (const auto& [name, in, out] :
       {std::tuple{"sharegpt", 161.31, 337.99}, std::tuple{"alpaca", 19.31, 58.45}}) {
    SCOPED_TRACE(name);
    const auto trace = GenerateTrace(*LookupWorkload(name), Options(1));
    ASSERT_TRUE(trace.ok()) << trace.status();
    ASSERT_EQ(trace->size(), kMany);
    const Means m = MeansOf(*trace);
    EXPECT_NEAR(m.input, in, 0.03 * in);
    EXPECT_NEAR(m.output, out, 0.03 * out);
    for (const TraceRequest& r : *trace) {
      ASSERT_GE(r.input_len, 1);
      ASSERT_GE(r.output_len, 1);
      ASSERT_LE(r.input_len + r.output_len, 2048);
    }
  }
}

TEST(TraceTest, ClippingToAShortModelKeepsLengthsLegal) {
  const auto trace = GenerateTrace(*LookupWorkload("sharegpt"), Options(1, 2000, 256));
  ASSERT_TRUE(trace.ok());
  for (const TraceRequest& r : *trace) ASSERT_LE(r.input_len + r.output_len, 256);
}

TEST(TraceTest, PoissonArrivalsHaveTheRequestedRate) {
  const auto trace = GenerateTrace(*LookupWorkload("sharegpt"), Options(4));
  ASSERT_TRUE(trace.ok());
  EXPECT_EQ(trace->front().arrival_s, 0);
  const double span = trace->back().arrival_s;
  EXPECT_NEAR(static_cast<double>(kMany - 1) / span, 4.0, 0.12);
  // Exponential gaps: the coefficient of variation is 1.
  double sum = 0, sq = 0;
  for (size_t i = 1; i < trace->size(); ++i) {
    const double gap = (*trace)[i].arrival_s - (*trace)[i - 1].arrival_s;
    ASSERT_GE(gap, 0);
    sum += gap, sq += gap * gap;
  }
  const double n = static_cast<double>(kMany - 1);
  const double mean = sum / n;
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean) / mean, 1.0, 0.05);
}

TEST(TraceTest, ARateSweepReplaysTheSameRequestsCloserTogether) {
  const auto slow = GenerateTrace(*LookupWorkload("alpaca"), Options(2, 500));
  const auto fast = GenerateTrace(*LookupWorkload("alpaca"), Options(8, 500));
  ASSERT_TRUE(slow.ok() && fast.ok());
  for (size_t i = 0; i < slow->size(); ++i) {
    EXPECT_EQ((*slow)[i].input_len, (*fast)[i].input_len);
    EXPECT_EQ((*slow)[i].output_len, (*fast)[i].output_len);
    EXPECT_NEAR((*slow)[i].arrival_s, 4 * (*fast)[i].arrival_s, 1e-9);
  }
}

TEST(TraceTest, InfiniteRateAndBadOptions) {
  const auto burst =
      GenerateTrace(*LookupWorkload("alpaca"), Options(std::numeric_limits<double>::infinity()));
  ASSERT_TRUE(burst.ok());
  EXPECT_EQ(burst->back().arrival_s, 0);
  EXPECT_FALSE(GenerateTrace(*LookupWorkload("alpaca"), Options(0)).ok());
  EXPECT_FALSE(GenerateTrace(*LookupWorkload("alpaca"), Options(1, 10, 1)).ok());
  EXPECT_FALSE(LookupWorkload("lmsys").ok());
}

TEST(TraceTest, ClippedLognormalMeanMatchesSampling) {
  EXPECT_NEAR(ClippedLognormalMean(1.0, 0.5, 1e-12, 1e12), std::exp(1.0 + 0.125), 1e-9);
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> d(5.0, 1.0);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) sum += std::clamp(d(rng), 100.0, 400.0);
  EXPECT_NEAR(ClippedLognormalMean(5.0, 1.0, 100, 400), sum / n, 0.5);
}

class TraceFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() /
            ("simulate_trace_test_" + std::to_string(::getpid()) + ".jsonl");
    std::ofstream(path_) << text;
    return path_.string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_;
};

TEST_F(TraceFileTest, ReadsArrivalsAndSortsByThem) {
  bool given = false;
  const auto t = LoadTraceJsonl(Write("{\"arrival_s\": 2.5, \"input_len\": 10, \"output_len\": 5}\n"
                                      "\n"
                                      "{\"arrival_s\": 1, \"input_len\": 3, \"output_len\": 4}\n"),
                                Options(1, 0), &given);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(given);
  ASSERT_EQ(t->size(), 2);
  EXPECT_EQ((*t)[0].arrival_s, 1);
  EXPECT_EQ((*t)[0].input_len, 3);
  EXPECT_EQ((*t)[1].output_len, 5);
}

TEST_F(TraceFileTest, MissingArrivalsArePoissonAndNumRequestsCaps) {
  bool given = true;
  const auto t = LoadTraceJsonl(Write("{\"input_len\": 10, \"output_len\": 5}\n"
                                      "{\"input_len\": 3, \"output_len\": 4}\n"
                                      "{\"input_len\": 7, \"output_len\": 1}\n"),
                                Options(1, 2), &given);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(given);
  ASSERT_EQ(t->size(), 2);
  EXPECT_EQ((*t)[0].arrival_s, 0);
  EXPECT_GT((*t)[1].arrival_s, 0);
}

TEST_F(TraceFileTest, RejectsBadLinesWithTheirNumber) {
  for (const char* text :
       {"{\"input_len\": 10}\n", "not json\n", "{\"input_len\": 0, \"output_len\": 5}\n",
        "{\"input_len\": 2000, \"output_len\": 100}\n",
        "{\"arrival_s\": 1, \"input_len\": 1, \"output_len\": 1}\n"
        "{\"input_len\": 1, \"output_len\": 1}\n"}) {
    SCOPED_TRACE(text);
    const auto t = LoadTraceJsonl(Write(text), Options(1, 0));
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(LoadTraceJsonl("/nonexistent/trace.jsonl", Options(1)).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pagellm::sim
