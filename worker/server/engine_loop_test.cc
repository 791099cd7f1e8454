// EngineLoop without a model: a ScriptedBackend whose every step advances an injected clock by
// exactly 10 ms, so the latency histograms have values known in advance.
#include "worker/server/engine_loop.h"

#include <atomic>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"
#include "worker/backend/mock/mock_backend.h"
#include "worker/backend/testing/scripted_backend.h"
#include "worker/engine/testing/sampling.h"

namespace pagellm {
namespace {

using testing::ScriptedBackend;

constexpr double kStep = 0.010;  // seconds per engine step on the fake clock

// Records one request's outputs and its end; Wait() blocks until OnDone.
class Sink : public RequestSink {
 public:
  void OnOutputs(std::span<const SequenceOutput> outputs) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const SequenceOutput& o : outputs) {
      tokens_.insert(tokens_.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  }
  void OnDone(const absl::Status& status, int64_t prompt_tokens,
              int64_t completion_tokens) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    completion_tokens_ = completion_tokens;
    done_ = true;
    cv_.notify_all();
  }
  absl::Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    return status_;
  }
  std::vector<int32_t> tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    return tokens_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  absl::Status status_;
  int64_t completion_tokens_ = 0;
  std::vector<int32_t> tokens_;
};

// (count, sum) of a histogram in the registry.
std::pair<uint64_t, double> Histogram(const WorkerMetrics& m, const std::string& name) {
  for (const prometheus::MetricFamily& f : m.registry()->Collect()) {
    if (f.name == name && !f.metric.empty()) {
      return {f.metric[0].histogram.sample_count, f.metric[0].histogram.sample_sum};
    }
  }
  ADD_FAILURE() << "no histogram " << name;
  return {0, 0};
}

SamplingParams Greedy(int32_t max_tokens) { return testing::GreedyParams(max_tokens); }

class EngineLoopTest : public ::testing::Test {
 protected:
  // The first step waits for `go_`, so everything submitted before Go() arrives at time 0.
  void Start(EngineOptions eo = {}) {
    auto tokenizer = MockTokenizer();
    ASSERT_TRUE(tokenizer.ok());
    tokenizer_ = std::move(*tokenizer);
    backend_ =
        std::make_unique<ScriptedBackend>(testing::ScriptedBackendOptions{.vocab_size = 257});
    backend_->SetStepHook([this] {
      go_.WaitForNotification();
      now_.store(now_.load() + kStep);
    });
    auto engine = Engine::Create(backend_.get(), tokenizer_.get(), eo);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EngineLoop::Options o;
    o.block_size = backend_->block_size();
    o.metrics = &metrics_;
    o.clock = [this] { return now_.load(); };
    loop_ = EngineLoop::Start(std::move(*engine), std::move(o));
  }
  void Go() { go_.Notify(); }
  void TearDown() override {
    if (!go_.HasBeenNotified()) go_.Notify();
    if (loop_ != nullptr) loop_->Stop();
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ScriptedBackend> backend_;
  WorkerMetrics metrics_;
  std::unique_ptr<EngineLoop> loop_;
  std::atomic<double> now_{0.0};
  absl::Notification go_;
};

TEST_F(EngineLoopTest, LatencyHistogramsFollowTheEngineSteps) {
  EngineOptions eo;
  eo.max_num_seqs = 1;  // b waits for a
  Start(eo);
  const std::vector<int32_t> pa = {40, 41, 42}, pb = {50, 51};
  auto a = std::make_shared<Sink>(), b = std::make_shared<Sink>();
  ASSERT_TRUE(loop_->Submit("a", pa, Greedy(4), a).ok());
  ASSERT_TRUE(loop_->Submit("b", pb, Greedy(3), b).ok());
  Go();
  ASSERT_TRUE(a->Wait().ok());
  ASSERT_TRUE(b->Wait().ok());
  EXPECT_EQ(a->tokens(), backend_->Continue(pa, 4));
  EXPECT_EQ(b->tokens(), backend_->Continue(pb, 3));

  // a: steps 1-4 (first token after step 1). b: admitted once a finished, steps 5-7.
  const auto ttft = Histogram(metrics_, "pagellm_time_to_first_token_seconds");
  EXPECT_EQ(ttft.first, 2u);
  EXPECT_NEAR(ttft.second, 1 * kStep + 5 * kStep, 1e-9);
  const auto itl = Histogram(metrics_, "pagellm_inter_token_latency_seconds");
  EXPECT_EQ(itl.first, 3u + 2u);
  EXPECT_NEAR(itl.second, 5 * kStep, 1e-9);
  const auto e2e = Histogram(metrics_, "pagellm_e2e_request_latency_seconds");
  EXPECT_EQ(e2e.first, 2u);
  EXPECT_NEAR(e2e.second, 4 * kStep + 7 * kStep, 1e-9);
  // Queue time ends when a step schedules the request, before it runs: a at once (step 1
  // starts at 0), b at the start of step 5.
  const auto queue = Histogram(metrics_, "pagellm_queue_time_seconds");
  EXPECT_EQ(queue.first, 2u);
  EXPECT_NEAR(queue.second, 0 * kStep + 4 * kStep, 1e-9);
}

TEST_F(EngineLoopTest, PerRequestHistogramsFollowVllmsDefinitions) {
  EngineOptions eo;
  eo.max_num_seqs = 1;  // one after another: a in steps 1-4, b in 5-7, c in 8
  Start(eo);
  auto a = std::make_shared<Sink>(), b = std::make_shared<Sink>(), c = std::make_shared<Sink>();
  ASSERT_TRUE(loop_->Submit("a", {40, 41, 42}, Greedy(4), a).ok());
  ASSERT_TRUE(loop_->Submit("b", {50, 51}, Greedy(3), b).ok());
  ASSERT_TRUE(loop_->Submit("c", {60}, Greedy(1), c).ok());  // over in the step that takes it
  Go();
  ASSERT_TRUE(a->Wait().ok());
  ASSERT_TRUE(b->Wait().ok());
  ASSERT_TRUE(c->Wait().ok());

  auto expect = [this](const char* name, uint64_t count, double sum) {
    const auto h = Histogram(metrics_, name);
    EXPECT_EQ(h.first, count) << name;
    EXPECT_NEAR(h.second, sum, 1e-9) << name;
  };
  expect("pagellm_request_prompt_tokens", 3, 3 + 2 + 1);
  expect("pagellm_request_generation_tokens", 3, 4 + 3 + 1);
  expect("pagellm_request_params_n", 3, 3);
  expect("pagellm_request_params_max_tokens", 3, 4 + 3 + 1);
  // Scheduled -> first token: one step each. First -> last token: 3, 2 and 0 steps.
  expect("pagellm_request_prefill_time_seconds", 3, 3 * kStep);
  expect("pagellm_request_decode_time_seconds", 3, (3 + 2 + 0) * kStep);
  expect("pagellm_request_inference_time_seconds", 3, (4 + 3 + 1) * kStep);
  // Decode time per token after the first: a 3 steps / 3 tokens, b 2 / 2; c has none.
  expect("pagellm_request_time_per_output_token_seconds", 2, 2 * kStep);
  // Queue time of c too, which ended in the step that scheduled it: a 0, b 4, c 7 steps.
  expect("pagellm_queue_time_seconds", 3, (0 + 4 + 7) * kStep);
  // Tokens per step: a's prefill of 3 with its first token, 3 decodes; b likewise (2 + 1, 2
  // decodes); c's prefill of 1 with its token.
  expect("pagellm_iteration_tokens", 8, (3 + 1) + 3 + (2 + 1) + 2 + (1 + 1));
}

TEST_F(EngineLoopTest, CancelEndsTheRequestAndFreesItsBlocks) {
  Start();
  auto sink = std::make_shared<Sink>();
  ASSERT_TRUE(loop_->Submit("long", {1, 2, 3}, Greedy(400), sink).ok());
  loop_->Cancel("long");
  Go();
  EXPECT_EQ(sink->Wait().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(loop_->WaitUntilIdle(5.0));
  const EngineLoad load = loop_->load();
  EXPECT_EQ(load.kv_blocks_free, load.kv_blocks_total);
  EXPECT_EQ(load.active, 0);
}

TEST_F(EngineLoopTest, DrainingRefusesNewWorkAndLetsRunningWorkFinish) {
  Start();
  auto sink = std::make_shared<Sink>();
  ASSERT_TRUE(loop_->Submit("r", {7, 8}, Greedy(5), sink).ok());
  loop_->SetDraining();
  EXPECT_EQ(loop_->Submit("late", {7}, Greedy(1), std::make_shared<Sink>()).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(loop_->load().draining);
  Go();
  EXPECT_TRUE(loop_->WaitUntilIdle(5.0));
  EXPECT_TRUE(sink->Wait().ok());
  EXPECT_EQ(sink->tokens().size(), 5u);
}

TEST_F(EngineLoopTest, ARejectedRequestEndsWithItsError) {
  Start();
  Go();
  auto sink = std::make_shared<Sink>();
  ASSERT_TRUE(loop_->Submit("oov", {9999}, Greedy(2), sink).ok());
  EXPECT_EQ(sink->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(loop_->WaitUntilIdle(5.0));
}

// Structured output is compiled by Submit, on the caller's thread: a pattern that does not
// compile is refused there while the engine thread is still held at its first step, and one
// that compiles runs under its grammar.
TEST_F(EngineLoopTest, StructuredOutputCompilesOnTheCallersThread) {
  Start();
  SamplingParams bad = Greedy(4);
  bad.structured_output.kind = StructuredOutput::Kind::kRegex;
  bad.structured_output.regex = "(a)\\1";
  const absl::Status refused = loop_->Submit("bad", {5}, bad, std::make_shared<Sink>());
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("backreferences are not supported"), absl::string_view::npos);
  EXPECT_EQ(loop_->load().active, 0);
  SamplingParams good = Greedy(8);
  good.structured_output.kind = StructuredOutput::Kind::kRegex;
  good.structured_output.regex = "[ab]{3}";
  auto sink = std::make_shared<Sink>();
  ASSERT_TRUE(loop_->Submit("good", {5}, good, sink).ok());
  Go();
  EXPECT_TRUE(sink->Wait().ok());
  EXPECT_EQ(sink->tokens().size(), 3u);  // the grammar ended it
  EXPECT_TRUE(loop_->WaitUntilIdle(5.0));
}

// Issue 9: a request the sampler cannot serve (here: no finite logit at all) ends with the
// sampler's error, not with OK and an empty abort, and frees its blocks.
TEST_F(EngineLoopTest, ARequestTheSamplerCannotServeEndsWithAnError) {
  Start();
  backend_->SetRule([](std::span<const int32_t>, std::span<float> row) {
    for (float& x : row) x = -std::numeric_limits<float>::infinity();
  });
  Go();
  auto sink = std::make_shared<Sink>();
  SamplingParams params = Greedy(4);
  params.n = 2;
  params.temperature = 0.7f;
  ASSERT_TRUE(loop_->Submit("no-finite-logit", {5, 6, 7}, params, sink).ok());
  const absl::Status status = sink->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("sampling failed"), absl::string_view::npos) << status;
  EXPECT_TRUE(loop_->WaitUntilIdle(5.0));
  const EngineLoad load = loop_->load();
  EXPECT_EQ(load.kv_blocks_free, load.kv_blocks_total);
}

// What a sink observes when its first output arrives: the load and metrics published then. It
// runs on the engine thread, as a gRPC stream's writer does.
class ObservingSink : public Sink {
 public:
  explicit ObservingSink(std::function<void()> observe) : observe_(std::move(observe)) {}
  void OnOutputs(std::span<const SequenceOutput> outputs) override {
    if (!observed_) observe_();
    observed_ = true;
    Sink::OnOutputs(outputs);
  }

 private:
  std::function<void()> observe_;
  bool observed_ = false;
};

// The load and metrics of a step are published before its outputs go out: a router that has
// seen a request's first response and then polls never finds it still waiting, and a client
// that scrapes the metrics after a response sees that response's step counted.
TEST_F(EngineLoopTest, AStepsLoadIsPublishedBeforeItsOutputsGoOut) {
  EngineOptions eo;
  eo.max_num_seqs = 1;  // b waits for a
  Start(eo);
  EngineLoad at_a, at_b;
  double prompt_tokens_at_a = -1, generated_at_b = -1;
  auto a = std::make_shared<ObservingSink>([&] {
    at_a = loop_->load();
    prompt_tokens_at_a = metrics_.prompt_tokens->Value();
  });
  auto b = std::make_shared<ObservingSink>([&] {
    at_b = loop_->load();
    generated_at_b = metrics_.generation_tokens->Value();
  });
  ASSERT_TRUE(loop_->Submit("a", {40, 41, 42}, Greedy(2), a).ok());
  ASSERT_TRUE(loop_->Submit("b", {50, 51}, Greedy(1), b).ok());
  Go();
  ASSERT_TRUE(a->Wait().ok());
  ASSERT_TRUE(b->Wait().ok());
  EXPECT_EQ(at_a.running, 1);
  EXPECT_EQ(at_a.waiting, 1);  // b
  EXPECT_EQ(prompt_tokens_at_a, 3);
  EXPECT_EQ(at_b.running, 0);  // b got its one token and finished in that step
  EXPECT_EQ(at_b.waiting, 0);
  EXPECT_EQ(generated_at_b, 3);     // a's two and b's one
  EXPECT_EQ(at_b.max_num_seqs, 1);  // what a router counts its placements against
}

}  // namespace
}  // namespace pagellm
