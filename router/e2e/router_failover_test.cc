// Worker failures through a real RouterServer in front of in-process fake workers
// (router_test_fixture.h): streams resumed on another worker after the tokens their clients
// have, streams that cannot be resumed ending promptly, workers failing once the answer is
// whole, retries before the first token, and worker errors passed on.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagellm/v1/generation.grpc.pb.h"
#include "router/e2e/router_test_fixture.h"
#include "router/testing/fake_worker.h"

namespace pagellm {
namespace {

using testing::FakeWorker;
using testing::Load;
using testing::Request;
using testing::RouterTest;
using testing::StreamResult;
using testing::WaitFor;

// A stream of one sample whose worker dies goes on from another worker, after the tokens its
// client has: no token lost or repeated, the same seed (the router's, when the client set
// none) so that the draws go on too.
TEST_F(RouterTest, WorkerDyingMidStreamIsResumedOnAnotherAfterTheTokensSent) {
  auto [a, b] = AddFirstChoiceAndOther();
  StartRouter();

  grpc::ClientContext context;
  v1::GenerateRequest request = Request("moves", 50);
  request.mutable_sampling()->set_temperature(0.8f);
  auto reader = stub_->Generate(&context, request);
  v1::GenerateResponse m;
  std::vector<int32_t> ids;
  std::string text;
  auto take = [&] {
    for (const auto& d : m.deltas()) {
      ids.insert(ids.end(), d.token_ids().begin(), d.token_ids().end());
      text += d.text();
    }
  };
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(reader->Read(&m));
    take();
  }
  const absl::Time killed_at = absl::Now();
  a.Kill();
  ASSERT_TRUE(reader->Read(&m));  // the stream goes on
  take();
  EXPECT_LT(absl::Now() - killed_at, absl::Seconds(1));
  while (reader->Read(&m)) take();
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::string expected;
  for (int i = 0; i < 50; ++i) expected.push_back(static_cast<char>('a' + i % 26));
  EXPECT_EQ(text, expected);
  EXPECT_EQ(ids, std::vector<int32_t>(expected.begin(), expected.end()));
  EXPECT_EQ(m.usage().completion_tokens(), 50);

  const std::vector<v1::WorkerGenerateRequest> on_a = a.requests();
  const std::vector<v1::WorkerGenerateRequest> on_b = b.requests();
  ASSERT_EQ(on_a.size(), 1u);
  ASSERT_EQ(on_b.size(), 1u);
  const v1::WorkerGenerateRequest& first = on_a[0];
  const v1::WorkerGenerateRequest& resumed = on_b[0];
  EXPECT_EQ(first.resumed_output_token_ids_size(), 0);
  EXPECT_GE(resumed.resumed_output_token_ids_size(), 3);
  EXPECT_LT(resumed.resumed_output_token_ids_size(), 50);
  EXPECT_TRUE(std::equal(resumed.resumed_output_token_ids().begin(),
                         resumed.resumed_output_token_ids().end(), expected.begin()));
  ASSERT_TRUE(first.sampling().has_seed()) << "the router seeds an unseeded request";
  EXPECT_EQ(resumed.sampling().seed(), first.sampling().seed());
  EXPECT_EQ(resumed.prompt_token_ids_size(), first.prompt_token_ids_size());
}

// Several samples resume together: each after the tokens its client has, a finished one not
// at all (the workers' samples here go in step, so none finishes early); the older worker's
// field holds them all back to back, so that a worker that predates resumed_samples refuses
// the request instead of starting every sample again. The next worker needs room for the
// longest sample, not for all: each runs alone there.
TEST_F(RouterTest, WorkerDyingMidStreamResumesEverySampleAfterItsOwnTokens) {
  FakeWorker::Options slow;
  slow.token_interval = absl::Milliseconds(10);
  slow.load = Load(1000);
  FakeWorker& a = AddWorker(slow);
  FakeWorker::Options small;
  small.load = Load(16, 16);  // 64 tokens: the prompt and one sample's 25, not all three's 75
  FakeWorker& b = AddWorker(small);
  StartRouter();
  constexpr int kSamples = 3;
  grpc::ClientContext context;
  v1::GenerateRequest request = Request("samples", 40);
  request.mutable_sampling()->set_n(kSamples);
  request.mutable_sampling()->set_temperature(0.8f);
  auto reader = stub_->Generate(&context, request);
  v1::GenerateResponse m;
  std::vector<std::string> texts(kSamples);
  auto take = [&] {
    for (const auto& d : m.deltas()) texts.at(d.sample_index()) += d.text();
  };
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(reader->Read(&m));
    take();
  }
  a.Kill();
  while (reader->Read(&m)) take();
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::string expected;
  for (int i = 0; i < 40; ++i) expected.push_back(static_cast<char>('a' + i % 26));
  for (const std::string& t : texts) EXPECT_EQ(t, expected);
  EXPECT_EQ(m.usage().completion_tokens(), 40 * kSamples);

  const std::vector<v1::WorkerGenerateRequest> on_a = a.requests();
  const std::vector<v1::WorkerGenerateRequest> on_b = b.requests();
  ASSERT_EQ(on_a.size(), 1u);
  ASSERT_EQ(on_b.size(), 1u);
  const v1::WorkerGenerateRequest& first = on_a[0];
  const v1::WorkerGenerateRequest& resumed = on_b[0];
  EXPECT_EQ(first.resumed_samples_size(), 0);
  ASSERT_TRUE(first.sampling().has_seed()) << "the router seeds an unseeded request";
  EXPECT_EQ(resumed.sampling().seed(), first.sampling().seed());
  ASSERT_EQ(resumed.resumed_samples_size(), kSamples);
  const int had = resumed.resumed_samples(0).token_ids_size();
  EXPECT_GE(had, 25);
  EXPECT_LT(had, 40);
  std::vector<int32_t> all;
  for (const v1::ResumedSample& s : resumed.resumed_samples()) {
    EXPECT_FALSE(s.finished());
    ASSERT_EQ(s.token_ids_size(), had);
    EXPECT_TRUE(std::equal(s.token_ids().begin(), s.token_ids().end(), expected.begin()));
    all.insert(all.end(), s.token_ids().begin(), s.token_ids().end());
  }
  EXPECT_THAT(resumed.resumed_output_token_ids(), ::testing::ElementsAreArray(all));
}

// A stream that cannot be resumed (beam search) ends promptly with UNAVAILABLE when its worker
// dies; the other worker takes the next requests, and the restarted one is used again.
TEST_F(RouterTest, WorkerDyingMidStreamEndsTheStreamPromptlyAndTheOtherTakesOver) {
  auto [a, b] = AddFirstChoiceAndOther();
  StartRouter();

  grpc::ClientContext context;
  v1::GenerateRequest beams = Request("dies", 50);
  beams.mutable_sampling()->set_beam_width(2);
  beams.mutable_sampling()->set_temperature(0.0f);
  auto reader = stub_->Generate(&context, beams);
  v1::GenerateResponse m;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(reader->Read(&m));
  const absl::Time killed_at = absl::Now();
  a.Kill();
  while (reader->Read(&m)) {
  }
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_LT(absl::Now() - killed_at, absl::Seconds(1));

  for (int i = 0; i < 3; ++i) {
    StreamResult r = Generate(Request(absl::StrCat("after", i), 3));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.tokens, 3);
  }
  EXPECT_EQ(b.completed(), 3);

  // The restarted worker is used again once a poll sees it.
  b.SetLoad(Load(10));
  a.Restart();
  ASSERT_TRUE(WaitFor([&] { return router_->worker_stats().ready == 2; }));
  const int before = a.generate_calls();
  StreamResult r = Generate(Request("back", 3));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(a.generate_calls(), before + 1);
}

// Each sample's text (sample_index -> the deltas' text) and whether a delta ended with ABORT.
std::vector<std::string> SampleTexts(const StreamResult& r, int n, bool* saw_abort = nullptr) {
  std::vector<std::string> texts(n);
  for (const v1::GenerateResponse& m : r.messages) {
    for (const v1::SampleDelta& d : m.deltas()) {
      texts.at(d.sample_index()) += d.text();
      if (saw_abort != nullptr) *saw_abort |= d.finish_reason() == v1::FINISH_REASON_ABORT;
    }
  }
  return texts;
}

std::string Letters(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + i % 26));
  return s;
}

// A worker that fails once the client has its whole answer -- after its last message, or after
// every sample's last token but before the last message -- does not fail the request: it ends
// OK, nothing is run again, and the usage the worker did not send is the router's count. Beams,
// which never resume, too.
TEST_F(RouterTest, WorkerFailingAfterTheWholeAnswerStillEndsOk) {
  auto [a, b] = AddFirstChoiceAndOther();
  StartRouter();
  const std::string prompt = "hi";  // <s> and two bytes
  for (FakeWorker::Ending ending :
       {FakeWorker::Ending::kFailAfterLast, FakeWorker::Ending::kFailBeforeUsage}) {
    a.SetEnding(ending);
    v1::GenerateRequest request = Request("whole", 12, prompt);
    request.mutable_sampling()->set_n(3);
    request.mutable_sampling()->set_temperature(0.8f);
    const StreamResult r = Generate(request);
    ASSERT_TRUE(r.status.ok()) << static_cast<int>(ending) << ": " << r.status.error_message();
    for (const std::string& t : SampleTexts(r, 3)) EXPECT_EQ(t, Letters(12));
    ASSERT_FALSE(r.messages.empty());
    const v1::GenerateResponse& last = r.messages.back();
    EXPECT_TRUE(last.finished());
    EXPECT_EQ(last.request_id(), "whole");
    EXPECT_EQ(last.usage().prompt_tokens(), 3);
    EXPECT_EQ(last.usage().completion_tokens(), 36);
    // The worker failed with UNAVAILABLE: the router takes it out of use until a poll sees it.
    ASSERT_TRUE(WaitFor([&] { return router_->worker_stats().ready == 2; }));
  }
  v1::GenerateRequest beams = Request("beams", 8, prompt);
  beams.mutable_sampling()->set_beam_width(2);
  beams.mutable_sampling()->set_temperature(0.0f);
  a.SetEnding(FakeWorker::Ending::kFailAfterLast);
  const StreamResult r = Generate(beams);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens, 16);
  EXPECT_EQ(a.generate_calls(), 3);
  EXPECT_EQ(b.generate_calls(), 0) << "nothing ran again";
}

// An engine failure ends every sample with reason ABORT, then the stream with UNAVAILABLE. The
// samples go on from another worker after their tokens, and the client sees no ABORT.
TEST_F(RouterTest, SamplesAbortedByAFailingEngineGoOnFromAnotherWorker) {
  auto [a, b] = AddFirstChoiceAndOther();
  a.SetEnding(FakeWorker::Ending::kAbortMidway);
  StartRouter();
  v1::GenerateRequest request = Request("aborted", 20);
  request.mutable_sampling()->set_n(2);
  const StreamResult r = Generate(request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  bool saw_abort = false;
  for (const std::string& t : SampleTexts(r, 2, &saw_abort)) EXPECT_EQ(t, Letters(20));
  EXPECT_FALSE(saw_abort);
  EXPECT_EQ(r.messages.back().usage().completion_tokens(), 40);
  const std::vector<v1::WorkerGenerateRequest> on_b = b.requests();
  ASSERT_EQ(on_b.size(), 1u);
  ASSERT_EQ(on_b[0].resumed_samples_size(), 2);
  for (const v1::ResumedSample& s : on_b[0].resumed_samples()) {
    EXPECT_FALSE(s.finished());
    EXPECT_EQ(s.token_ids_size(), 10);
  }

  // With nowhere to go on, the stream ends with the worker's UNAVAILABLE, not OK.
  b.SetGenerateError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone"));
  ASSERT_TRUE(WaitFor([&] { return router_->worker_stats().ready == 2; }));
  const StreamResult failed = Generate(request);
  EXPECT_EQ(failed.status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(RouterTest, UnavailableBeforeTheFirstTokenIsRetriedOnAnotherWorker) {
  FakeWorker::Options first;
  first.load = Load(1000);
  FakeWorker& a = AddWorker(first);
  FakeWorker::Options second;
  second.load = Load(500);
  FakeWorker& b = AddWorker(second);
  a.SetGenerateError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "draining"));
  StartRouter();
  StreamResult r = Generate(Request("retry", 4));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens, 4);
  EXPECT_EQ(a.generate_calls(), 1);
  EXPECT_EQ(b.generate_calls(), 1);
}

TEST_F(RouterTest, UnavailableTwiceEndsWithUnavailable) {
  FakeWorker& a = AddWorker();
  FakeWorker& b = AddWorker();
  a.SetGenerateError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone"));
  b.SetGenerateError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone"));
  StartRouter();
  StreamResult r = Generate(Request("twice"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(a.generate_calls() + b.generate_calls(), 2);
}

TEST_F(RouterTest, WorkerErrorsOtherThanUnavailableAreForwardedAsTheyAre) {
  FakeWorker& w = AddWorker();
  StartRouter();
  for (auto code : {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::RESOURCE_EXHAUSTED}) {
    w.SetGenerateError(grpc::Status(code, "worker says no"));
    StreamResult r = Generate(Request("e"));
    EXPECT_EQ(r.status.error_code(), code);
    EXPECT_EQ(r.status.error_message(), "worker says no");
  }
  EXPECT_EQ(w.generate_calls(), 2) << "no retry for a request the worker refused";
}

}  // namespace
}  // namespace pagellm
