// RunServingBench against the in-process FakeWorker (router/testing/fake_worker.h, serving the
// public API too), for both endpoints. Timing checks
// leave room for a loaded machine: they bound what the fake server's pace makes impossible
// (a gap shorter than the pace) tightly and the slack above it loosely.
#include "tools/bench/serving_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "router/testing/fake_worker.h"

namespace pagellm::bench {
namespace {

using ::pagellm::testing::FakeWorker;

constexpr double kSlackMs = 15.0;  // scheduling noise on a busy 2-core machine

class ServingBenchTest : public ::testing::TestWithParam<Endpoint> {
 protected:
  // The fake's options for a model of 1000 tokens and a 4096-token context, both APIs served.
  static FakeWorker::Options Fake() {
    FakeWorker::Options o;
    o.serve_generation = true;
    o.info.set_vocab_size(1000);
    o.info.set_max_model_len(4096);
    return o;
  }
  // Starts the fake server and a target for the endpoint under test.
  void Serve(const FakeWorker::Options& o) {
    server_ = FakeWorker::Start(o);
    target_ = std::make_unique<BenchTarget>(server_->NewChannel(), GetParam());
  }

  // `n` random-dataset requests over the model the server describes.
  std::vector<BenchRequest> Requests(int32_t n, int32_t input_len, int32_t output_len) {
    absl::StatusOr<v1::ModelInfo> info = target_->GetModelInfo(absl::Seconds(10));
    EXPECT_TRUE(info.ok()) << info.status();
    DatasetOptions d;
    d.num_prompts = n;
    d.input_len = input_len;
    d.output_len = output_len;
    d.vocab_size = info.ok() ? info->vocab_size() : 1000;
    d.max_model_len = info.ok() ? info->max_model_len() : 0;
    absl::StatusOr<std::vector<BenchRequest>> r = MakeDataset(d);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<BenchRequest>{};
  }

  ServingBenchResult Run(const std::vector<BenchRequest>& requests, ServingBenchOptions o = {}) {
    absl::StatusOr<ServingBenchResult> r = RunServingBench(target_.get(), requests, o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : ServingBenchResult{};
  }

  // Generate calls the fake saw (each test uses one endpoint).
  [[nodiscard]] int64_t Calls() const { return server_->generate_calls(); }

  std::unique_ptr<FakeWorker> server_;
  std::unique_ptr<BenchTarget> target_;
};

TEST_P(ServingBenchTest, CountsRequestsAndTokens) {
  Serve(Fake());
  const ServingBenchResult r = Run(Requests(16, 32, 8));
  EXPECT_EQ(r.metrics.completed, 16);
  EXPECT_EQ(r.metrics.failed, 0);
  EXPECT_EQ(r.metrics.total_input_tokens, 16 * 32);
  EXPECT_EQ(r.metrics.total_output_tokens, 16 * 8);
  EXPECT_GT(r.duration_s, 0);
  EXPECT_EQ(Calls(), 17);  // the initial test run, then the 16
  for (const RequestRecord& rec : r.records) EXPECT_EQ(rec.output_tokens(), 8);
}

TEST_P(ServingBenchTest, SendsTokenIdsWithIgnoreEosGreedyAndMaxTokens) {
  Serve(Fake());
  Run(Requests(4, 20, 6));
  const std::vector<v1::WorkerGenerateRequest> seen = server_->requests();
  ASSERT_EQ(seen.size(), 5u);
  for (const v1::WorkerGenerateRequest& q : seen) {
    EXPECT_EQ(q.prompt_token_ids_size(), 20);
    for (int32_t id : q.prompt_token_ids()) {
      EXPECT_GE(id, 100);
      EXPECT_LT(id, 1000);
    }
    EXPECT_EQ(q.sampling().max_tokens(), 6);
    EXPECT_TRUE(q.sampling().ignore_eos());
    EXPECT_EQ(q.sampling().temperature(), 0.0f);
  }
}

TEST_P(ServingBenchTest, TtftAndItlFollowTheServersPace) {
  FakeWorker::Options o = Fake();
  o.first_token_delay = absl::Milliseconds(40);
  o.token_interval = absl::Milliseconds(10);
  Serve(o);
  const ServingBenchResult r = Run(Requests(8, 16, 6));
  ASSERT_EQ(r.metrics.completed, 8);
  const BenchMetrics& m = r.metrics;
  EXPECT_GE(m.ttft.median_ms, 40);
  EXPECT_LE(m.ttft.median_ms, 40 + kSlackMs);
  EXPECT_GE(m.itl.median_ms, 9);  // a late message can shorten the gap after it, a little
  EXPECT_LE(m.itl.median_ms, 10 + kSlackMs);
  EXPECT_GE(m.tpot.mean_ms, 9.5);
  EXPECT_LE(m.tpot.mean_ms, 10 + kSlackMs);
  // E2E = TTFT + 5 gaps.
  EXPECT_GE(m.e2el.median_ms, 90);
  EXPECT_LE(m.e2el.median_ms, 90 + 3 * kSlackMs);
}

TEST_P(ServingBenchTest, TokensOfOneMessageArriveTogether) {
  FakeWorker::Options o = Fake();
  o.tokens_per_message = 4;
  o.token_interval = absl::Milliseconds(20);
  Serve(o);
  const ServingBenchResult r = Run(Requests(3, 8, 8));
  ASSERT_EQ(r.metrics.completed, 3);
  EXPECT_EQ(r.metrics.total_output_tokens, 24);
  for (const RequestRecord& rec : r.records) {
    ASSERT_EQ(rec.token_ns.size(), 8u);
    for (int i : {1, 2, 3, 5, 6, 7}) EXPECT_EQ(rec.token_ns[i], rec.token_ns[i - 1]) << i;
    EXPECT_GE(rec.token_ns[4] - rec.token_ns[3], 15'000'000);  // one message later
  }
  EXPECT_EQ(r.metrics.itl.median_ms, 0);  // 6 of every 7 gaps
  EXPECT_GE(r.metrics.itl.p99_ms, 15);
}

TEST_P(ServingBenchTest, MaxConcurrencyBoundsStreamsInFlight) {
  FakeWorker::Options o = Fake();
  o.token_interval = absl::Milliseconds(5);
  Serve(o);
  ServingBenchOptions limited;
  limited.max_concurrency = 3;
  const ServingBenchResult r = Run(Requests(12, 8, 6), limited);
  EXPECT_EQ(r.metrics.completed, 12);
  EXPECT_LE(server_->max_concurrent_streams(), 3);
  EXPECT_GE(server_->max_concurrent_streams(), 2);
  EXPECT_LE(r.metrics.peak_concurrency, 3);
}

TEST_P(ServingBenchTest, WithoutALimitEverythingIsInFlightAtOnce) {
  FakeWorker::Options o = Fake();
  o.first_token_delay = absl::Milliseconds(100);  // every call is still open when the last starts
  Serve(o);
  const ServingBenchResult r = Run(Requests(12, 8, 2));
  EXPECT_EQ(r.metrics.completed, 12);
  EXPECT_EQ(server_->max_concurrent_streams(), 12);
  EXPECT_EQ(r.metrics.peak_concurrency, 12);
}

TEST_P(ServingBenchTest, FiniteRateSpreadsRequests) {
  Serve(Fake());
  ServingBenchOptions o;
  o.request_rate = 40;  // one request every 25 ms ...
  o.burstiness = 400;   // ... almost exactly (gamma shape 400: CV 5%)
  const ServingBenchResult r = Run(Requests(10, 8, 2), o);
  EXPECT_EQ(r.metrics.completed, 10);
  EXPECT_GE(r.duration_s, 9 * 0.025 * 0.8);
  for (size_t i = 1; i < r.records.size(); ++i) {
    const double gap_ms = (r.records[i].send_ns - r.records[i - 1].send_ns) * 1e-6;
    EXPECT_GE(gap_ms, 25 * 0.7) << i;
    EXPECT_LE(gap_ms, 25 * 1.3 + kSlackMs) << i;
  }
}

TEST_P(ServingBenchTest, FailedRequestsAreCounted) {
  FakeWorker::Options o = Fake();
  o.fail_every = 4;
  Serve(o);
  ServingBenchOptions no_test_run;
  no_test_run.initial_test_run = false;
  const ServingBenchResult r = Run(Requests(12, 8, 4), no_test_run);
  EXPECT_EQ(r.metrics.completed, 9);
  EXPECT_EQ(r.metrics.failed, 3);
  EXPECT_EQ(r.metrics.total_output_tokens, 9 * 4);
  ASSERT_EQ(r.metrics.errors_by_code.count("UNAVAILABLE"), 1u);
  EXPECT_EQ(r.metrics.errors_by_code.at("UNAVAILABLE"), 3);
  EXPECT_EQ(r.metrics.error_examples.at("UNAVAILABLE"), "fake failure");
}

TEST_P(ServingBenchTest, FailingInitialTestRunFailsTheRun) {
  FakeWorker::Options o = Fake();
  o.fail_every = 1;
  o.fail_code = grpc::StatusCode::RESOURCE_EXHAUSTED;
  Serve(o);
  absl::StatusOr<ServingBenchResult> r = RunServingBench(target_.get(), Requests(5, 8, 4), {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("initial test run"), std::string::npos);
  EXPECT_EQ(Calls(), 1);
}

TEST_P(ServingBenchTest, RequestTimeoutFailsSlowRequests) {
  FakeWorker::Options o = Fake();
  o.first_token_delay = absl::Milliseconds(300);
  Serve(o);
  ServingBenchOptions opts;
  opts.initial_test_run = false;
  opts.request_timeout = absl::Milliseconds(50);
  const ServingBenchResult r = Run(Requests(3, 8, 4), opts);
  EXPECT_EQ(r.metrics.failed, 3);
  EXPECT_EQ(r.metrics.errors_by_code.at("DEADLINE_EXCEEDED"), 3);
}

TEST_P(ServingBenchTest, ManyTokensBackToBack) {
  Serve(Fake());
  const ServingBenchResult r = Run(Requests(32, 8, 1000));
  EXPECT_EQ(r.metrics.completed, 32);
  EXPECT_EQ(r.metrics.total_output_tokens, 32 * 1000);
  std::printf("client + in-process fake server: %.0f output tokens/s\n",
              r.metrics.output_throughput);
}

INSTANTIATE_TEST_SUITE_P(Endpoints, ServingBenchTest,
                         ::testing::Values(Endpoint::kRouter, Endpoint::kWorker),
                         [](const ::testing::TestParamInfo<Endpoint>& p) {
                           return std::string(EndpointName(p.param));
                         });

TEST(ServingBenchOptionsTest, RejectsBadOptions) {
  BenchTarget target("127.0.0.1:1", Endpoint::kWorker);
  ServingBenchOptions o;
  o.initial_test_run = false;
  EXPECT_EQ(RunServingBench(&target, {}, o).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<BenchRequest> one = {BenchRequest{{100, 101}, 2}};
  o.request_rate = 0;
  EXPECT_EQ(RunServingBench(&target, one, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.request_rate = 1;
  o.max_concurrency = -1;
  EXPECT_EQ(RunServingBench(&target, one, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServingBenchOptionsTest, UnreachableServerFailsEveryRequest) {
  BenchTarget target("127.0.0.1:1", Endpoint::kWorker);
  ServingBenchOptions o;
  o.initial_test_run = false;
  const std::vector<BenchRequest> two = {BenchRequest{{100}, 2}, BenchRequest{{101}, 2}};
  absl::StatusOr<ServingBenchResult> r = RunServingBench(&target, two, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->metrics.failed, 2);
  EXPECT_EQ(r->metrics.errors_by_code.at("UNAVAILABLE"), 2);
  EXPECT_EQ(target.GetModelInfo(absl::Seconds(5)).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace pagellm::bench
