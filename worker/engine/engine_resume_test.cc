// Resuming a request on another worker (the router's failover when a worker dies mid-stream):
// Engine::AddRequest's ResumedOutput, on the scripted backend (testing/engine_fixture.h).
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/engine/engine.h"
#include "worker/engine/testing/engine_fixture.h"

namespace pagellm {
namespace {

using testing::EngineTest;
using testing::Greedy;
using testing::kEos;
using testing::Outputs;
using testing::Prompt;
using testing::RunOne;
using testing::RunResult;
using testing::Seeded;
using testing::SpreadRule;

// A stream resumed after its first k tokens (the router's failover when a worker dies) goes on
// exactly as the uninterrupted request: the same seeded draws and penalties (they see the
// resumed tokens as output), and the text the first worker held back (a character split over
// tokens; a possible stop string) comes out of the second, never twice or lost.
TEST_F(EngineTest, AResumedRequestGoesOnAsIfItHadNeverMoved) {
  MakeBackend({.block_size = 4, .num_kv_blocks = 64});
  // Mostly the bytes of kText, in order; sometimes (seeded draws) a runner-up.
  static const std::string kText =
      "ab\xc3\xa9"
      "cd\xe2\x82\xac"
      " fin, ab cd ef gh";
  constexpr int64_t kPromptLen = 5;
  backend_->SetRule([](std::span<const int32_t> context, std::span<float> row) {
    std::fill(row.begin(), row.end(), -30.0f);
    const size_t at = (context.size() - kPromptLen) % kText.size();
    row[static_cast<unsigned char>(kText[at])] = 3.0f;
    row['x'] = 1.5f;
    row['y'] = 1.0f;
  });
  SamplingParams p = Greedy(24);
  p.temperature = 1.0f;
  p.seed = 99;
  p.frequency_penalty = 0.5f;
  p.stop = {"cd ef"};  // spans the resume points 17 and 18
  const std::vector<int32_t> prompt = Prompt(3, kPromptLen);
  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_TRUE(e->AddRequest("whole", prompt, p).ok());
  const Outputs whole = RunOne(e.get());
  ASSERT_GE(whole.tokens.size(), 12u);
  ASSERT_EQ(whole.texts.size(), whole.tokens.size());  // one token per output
  ASSERT_NE(std::count(whole.tokens.begin(), whole.tokens.end(), 'x') +
                std::count(whole.tokens.begin(), whole.tokens.end(), 'y'),
            0)
      << "the draws never left the text: the seed is not tested";

  for (size_t k = 1; k < whole.tokens.size(); ++k) {
    SCOPED_TRACE(k);
    const std::vector<int32_t> resumed(whole.tokens.begin(), whole.tokens.begin() + k);
    ASSERT_TRUE(
        e->AddRequest("resumed", prompt, p, std::nullopt, ResumedOutput::OneSample(resumed)).ok());
    const Outputs rest = RunOne(e.get());
    EXPECT_EQ(rest.tokens, std::vector<int32_t>(whole.tokens.begin() + k, whole.tokens.end()));
    EXPECT_EQ(whole.Text(0).substr(0, whole.Text(0).size() - whole.Text(k).size()) + rest.Text(),
              whole.Text());
    EXPECT_EQ(rest.Text(), whole.Text(k));
    EXPECT_EQ(rest.finish, whole.finish);
  }
}

TEST_F(EngineTest, AResumeIsRefusedWhereItCannotGoOn) {
  MakeBackend();
  std::unique_ptr<Engine> e = NewEngine();
  const std::vector<int32_t> prompt = Prompt(3, 5);
  const std::vector<int32_t> some = {'a', 'b'};
  auto refused = [&](const SamplingParams& p, std::vector<int32_t> resumed) {
    return e->AddRequest("r", prompt, p, std::nullopt, ResumedOutput::OneSample(resumed)).code() ==
           absl::StatusCode::kInvalidArgument;
  };
  SamplingParams two = Greedy(8);
  two.n = 2;
  EXPECT_TRUE(refused(two, some));
  SamplingParams beams = Greedy(8);
  beams.beam_width = 2;
  EXPECT_TRUE(refused(beams, some));
  SamplingParams scored = Greedy(8);
  scored.prompt_logprobs = 1;
  EXPECT_TRUE(refused(scored, some));
  EXPECT_TRUE(refused(Greedy(2), some)) << "nothing of max_tokens is left";
  EXPECT_TRUE(refused(Greedy(8), {'a', 257})) << "outside the vocabulary";
  SamplingParams eos = Greedy(8);
  eos.ignore_eos = false;
  EXPECT_TRUE(refused(eos, {'a', kEos})) << "the output ended already";
  SamplingParams stop = Greedy(8);
  stop.stop = {"ab"};
  EXPECT_TRUE(refused(stop, some)) << "a stop string ended it already";
  EXPECT_FALSE(e->HasUnfinished());
  EXPECT_TRUE(
      e->AddRequest("r", prompt, Greedy(8), std::nullopt, ResumedOutput::OneSample(some)).ok());
}

// A resumed request of several samples: each unfinished one goes on after its own tokens (none
// yet, for one still in its prompt) with its own draws, a finished one does not run again, and
// the request ends, frees its blocks and aborts as a whole.
TEST_F(EngineTest, ResumedSamplesEachGoOnAfterTheirOwnTokens) {
  MakeBackend({.block_size = 4, .num_kv_blocks = 64, .max_model_len = 64});
  backend_->SetRule(SpreadRule);
  SamplingParams p = Seeded(20, 77);
  p.n = 3;
  const std::vector<int32_t> prompt = Prompt(3, 10);
  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_TRUE(e->AddRequest("whole", prompt, p).ok());
  const RunResult whole = Drain(e.get());
  const auto sample = [&](int32_t i) -> const std::vector<int32_t>& {
    return whole.tokens.at({"whole", i});
  };
  ASSERT_NE(sample(0), sample(2)) << "the samples drew the same tokens: the streams are not tested";

  ResumedOutput resumed;
  resumed.samples = {
      {{sample(0).begin(), sample(0).begin() + 5}, false}, {sample(1), true}, {{}, false}};
  ASSERT_TRUE(e->AddRequest("r", prompt, p, std::nullopt, resumed).ok());
  EXPECT_EQ(e->AddRequest("r", prompt, Greedy(2)).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(e->RequestState("r"), GroupState::kWaiting);
  const RunResult rest = Drain(e.get());  // checks that no block is left held
  ASSERT_TRUE(rest.step_errors.empty());
  EXPECT_EQ(rest.tokens.at({"r", 0}), std::vector<int32_t>(sample(0).begin() + 5, sample(0).end()));
  EXPECT_FALSE(rest.tokens.contains({"r", 1})) << "a finished sample ran again";
  EXPECT_EQ(rest.tokens.at({"r", 2}), sample(2));
  EXPECT_EQ(rest.finish.at({"r", 0}), FinishReason::kLength);
  EXPECT_EQ(rest.finish.at({"r", 2}), FinishReason::kLength);
  EXPECT_FALSE(e->RequestState("r").has_value());

  // Aborted, every sample goes and the id is free again.
  ASSERT_TRUE(e->AddRequest("r", prompt, p, std::nullopt, resumed).ok());
  std::vector<SequenceOutput> outs;
  ASSERT_TRUE(e->Step(&outs).ok());
  EXPECT_GT(e->num_used_blocks(), 0);
  ASSERT_TRUE(e->Abort("r").ok());
  EXPECT_FALSE(e->HasUnfinished());
  EXPECT_EQ(e->num_used_blocks(), 0);
  EXPECT_FALSE(e->RequestState("r").has_value());

  // Refused: an entry per sample or nothing; something left to do; no beams; a sample that
  // would run must have room left.
  auto refused = [&](const SamplingParams& q, const ResumedOutput& r) {
    return e->AddRequest("x", prompt, q, std::nullopt, r).code() ==
           absl::StatusCode::kInvalidArgument;
  };
  ResumedOutput two = resumed;
  two.samples.pop_back();
  EXPECT_TRUE(refused(p, two));
  ResumedOutput done = resumed;
  for (ResumedOutput::Sample& s : done.samples) s.finished = true;
  EXPECT_TRUE(refused(p, done));
  SamplingParams beams = Greedy(20);
  beams.beam_width = 3;
  EXPECT_TRUE(refused(beams, resumed));
  ResumedOutput full = resumed;
  full.samples[2].tokens = sample(2);
  EXPECT_TRUE(refused(p, full)) << "20 tokens leave nothing of max_tokens 20";
  EXPECT_FALSE(e->HasUnfinished());
  EXPECT_EQ(e->num_used_blocks(), 0);
}

}  // namespace
}  // namespace pagellm
