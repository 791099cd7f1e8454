// Engine tests without a model: a ScriptedBackend (whose "model" is a rule of each sequence's
// whole context, read back through its paged KV blocks) and the mock byte tokenizer
// (testing/engine_fixture.h). Expected tokens come from the rule applied in a plain loop
// (ScriptedBackend::Continue), never from the engine. tests/engine_model_test.cc runs the engine
// on the real default model; engine_resume_test.cc resumes requests.
#include "worker/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/backend/mock/mock_backend.h"
#include "worker/backend/testing/scripted_backend.h"
#include "worker/engine/testing/engine_fixture.h"
#include "worker/model/lora_adapter.h"

namespace pagellm {
namespace {

using testing::EngineTest;
using testing::Greedy;
using ::testing::HasSubstr;
using testing::kEos;
using testing::Prompt;
using testing::RunResult;
using testing::ScriptedBackend;
using testing::ScriptedBackendOptions;
using testing::Seeded;
using testing::SpreadRule;

TEST_F(EngineTest, GreedyTokensFollowTheModelThroughThePagedCache) {
  MakeBackend();
  std::unique_ptr<Engine> e = NewEngine();
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(Prompt(i * 17, 3 + 2 * i));  // lengths across block boundaries (4 slots)
    ASSERT_TRUE(e->AddRequest(std::to_string(i), prompts.back(), Greedy(9)).ok());
  }
  const RunResult run = Drain(e.get());
  ASSERT_TRUE(run.step_errors.empty()) << run.step_errors.front();
  for (int i = 0; i < 6; ++i) {
    const auto key = std::make_pair(std::to_string(i), 0);
    EXPECT_EQ(run.tokens.at(key), backend_->Continue(prompts[i], 9)) << "request " << i;
    EXPECT_EQ(run.finish.at(key), FinishReason::kLength);
  }
  EXPECT_GT(backend_->all_decode_steps(), 0);  // decode steps say so
}

TEST_F(EngineTest, StreamedTextIsTheDecodedTokens) {
  MakeBackend();
  std::unique_ptr<Engine> e = NewEngine();
  const std::vector<int32_t> prompt = Prompt(5, 6);
  ASSERT_TRUE(e->AddRequest("r", prompt, Greedy(12)).ok());
  std::string text;
  std::vector<SequenceOutput> outs;
  while (e->HasUnfinished()) {
    outs.clear();
    ASSERT_TRUE(e->Step(&outs).ok());
    for (const SequenceOutput& o : outs) text += o.text;
  }
  EXPECT_EQ(text, tokenizer_->Decode(backend_->Continue(prompt, 12), /*skip_special=*/true));
}

TEST_F(EngineTest, ChunkedPrefillAndPreemptionLeaveTheTokensAlone) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(Prompt(31 * i, 10 + i));
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    SCOPED_TRACE(mode == PreemptionMode::kSwap ? "swap" : "recompute");
    // 24 blocks of 4 slots for 8 sequences that reach 27..34 tokens: preemption is certain.
    MakeBackend({.block_size = 4, .num_kv_blocks = 24, .num_swap_blocks = 64});
    EngineOptions o;
    o.preemption_mode = mode;
    o.max_num_batched_tokens = 16;  // prompts prefill in chunks
    o.enable_prefix_caching = false;
    o.watermark = 0.0;
    std::unique_ptr<Engine> e = NewEngine(o);
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(e->AddRequest(std::to_string(i), prompts[i], Greedy(17)).ok());
    }
    const RunResult run = Drain(e.get());
    ASSERT_TRUE(run.step_errors.empty()) << run.step_errors.front();
    EXPECT_GT(e->stats().preemptions(), 0);
    if (mode == PreemptionMode::kSwap) {
      EXPECT_GT(e->stats().swapped_out_blocks, 0);
    }
    EXPECT_LE(backend_->max_tokens_in_a_step(), 16);
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(run.tokens.at({std::to_string(i), 0}), backend_->Continue(prompts[i], 17))
          << "request " << i;
    }
  }
}

// vLLM's cache_salt: a prompt reuses cached blocks only from requests of the same salt.
TEST_F(EngineTest, ACacheSaltSharesPrefixBlocksOnlyWithTheSameSalt) {
  MakeBackend();
  std::unique_ptr<Engine> e = NewEngine();
  const std::vector<int32_t> prompt = Prompt(4, 33);
  auto hits_of = [&](const std::string& id, const std::string& salt) {
    SamplingParams p = Greedy(2);
    p.cache_salt = salt;
    const int64_t before = e->stats().prefix_cache_hit_tokens;
    EXPECT_TRUE(e->AddRequest(id, prompt, p).ok());
    const RunResult run = Drain(e.get());
    EXPECT_EQ(run.tokens.at({id, 0}), backend_->Continue(prompt, 2)) << id;
    return e->stats().prefix_cache_hit_tokens - before;
  };
  EXPECT_EQ(hits_of("first-a", "tenant-a"), 0);
  EXPECT_EQ(hits_of("unsalted", ""), 0) << "an unsalted request does not see tenant a's blocks";
  EXPECT_EQ(hits_of("first-b", "tenant-b"), 0);
  EXPECT_GE(hits_of("again-a", "tenant-a"), 32);
  EXPECT_GE(hits_of("again-unsalted", ""), 32);
  EXPECT_EQ(e->num_used_blocks(), 0);
}

TEST_F(EngineTest, PrefixCacheHitsReadTheSharedBlocks) {
  MakeBackend();
  std::unique_ptr<Engine> e = NewEngine();
  std::vector<int32_t> a = Prompt(3, 16), b = a;
  b.push_back(77);
  ASSERT_TRUE(e->AddRequest("a", a, Greedy(3)).ok());
  RunResult first = Drain(e.get());
  ASSERT_TRUE(e->AddRequest("b", b, Greedy(5)).ok());
  RunResult second = Drain(e.get());
  EXPECT_GE(e->stats().prefix_cache_hit_tokens, 12);
  EXPECT_EQ(second.tokens.at({"b", 0}), backend_->Continue(b, 5));
}

TEST_F(EngineTest, ParallelSamplesShareThePromptAndDrawTheirOwnStreams) {
  MakeBackend();
  backend_->SetRule(SpreadRule);
  SamplingParams p = Seeded(10, 1234);
  const std::vector<int32_t> prompt = Prompt(9, 11);
  std::unique_ptr<Engine> single = NewEngine();
  ASSERT_TRUE(single->AddRequest("r", prompt, p).ok());
  const RunResult one = Drain(single.get());

  p.n = 4;
  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_TRUE(e->AddRequest("r", prompt, p).ok());
  std::vector<SequenceOutput> outs;
  ASSERT_TRUE(e->Step(&outs).ok());  // prefill, then four first tokens
  EXPECT_EQ(outs.size(), 4u);
  // The four samples hold the prompt's 3 blocks once, plus a block each for their first token
  // once they diverge; before that the prompt's blocks are shared.
  EXPECT_LE(e->num_used_blocks(), 3 + 4);
  const RunResult four = Drain(e.get());
  // Sample 0 draws the request's own stream: the n = 1 run's tokens.
  std::vector<int32_t> first = {outs[0].new_token_ids[0]};
  const std::vector<int32_t>& rest = four.tokens.at({"r", 0});
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_EQ(first, one.tokens.at({"r", 0}));
  int distinct = 0;
  for (int32_t i = 1; i < 4; ++i) {
    std::vector<int32_t> s = {outs[i].new_token_ids[0]};
    s.insert(s.end(), four.tokens.at({"r", i}).begin(), four.tokens.at({"r", i}).end());
    EXPECT_EQ(s.size(), 10u);
    distinct += s != first;
  }
  EXPECT_GT(distinct, 0);
}

TEST_F(EngineTest, EosStopsASequenceOnceMinTokensAllow) {
  MakeBackend();
  // EOS is the most likely token from the 4th output on.
  const int64_t prompt_len = 5;
  backend_->SetRule([](std::span<const int32_t> context, std::span<float> row) {
    std::fill(row.begin(), row.end(), 0.0f);
    row[context.size() >= prompt_len + 3 ? kEos : 65] = 10.0f;
    row[66] = 9.0f;
  });
  SamplingParams p = Greedy(20);
  p.ignore_eos = false;
  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_TRUE(e->AddRequest("plain", Prompt(1, prompt_len), p).ok());
  p.min_tokens = 6;
  ASSERT_TRUE(e->AddRequest("min6", Prompt(1, prompt_len), p).ok());
  const RunResult run = Drain(e.get());
  EXPECT_EQ(run.tokens.at({"plain", 0}), (std::vector<int32_t>{65, 65, 65, kEos}));
  EXPECT_EQ(run.finish.at({"plain", 0}), FinishReason::kStop);
  // EOS is suppressed while fewer than 6 tokens exist; the runner-up (66) is taken instead.
  EXPECT_EQ(run.tokens.at({"min6", 0}), (std::vector<int32_t>{65, 65, 65, 66, 66, 66, kEos}));
}

TEST_F(EngineTest, BeamSearchKeepsTheBestHypothesesFirst) {
  MakeBackend();
  // Two strong candidates per step: NextToken (logit 5) and NextToken + 1 (logit 4).
  backend_->SetRule([this](std::span<const int32_t> context, std::span<float> row) {
    std::fill(row.begin(), row.end(), 0.0f);
    const int32_t next = backend_->NextToken(context);
    row[next] = 5.0f;
    row[(next + 1) % 256] = 4.0f;
  });
  SamplingParams p = Greedy(6);
  p.beam_width = 3;
  std::unique_ptr<Engine> e = NewEngine();
  const std::vector<int32_t> prompt = Prompt(40, 7);
  ASSERT_TRUE(e->AddRequest("b", prompt, p).ok());
  const RunResult run = Drain(e.get());
  ASSERT_EQ(run.tokens.size(), 3u);
  // Beam 0 follows the top candidate each step; its score is six times that logprob.
  EXPECT_EQ(run.tokens.at({"b", 0}), backend_->Continue(prompt, 6));
  const double z = std::log(std::exp(5.0) + std::exp(4.0) + 255.0);  // 255 others at 0
  EXPECT_NEAR(run.cumulative_logprob.at({"b", 0}), 6 * (5.0 - z), 1e-4);
  EXPECT_GE(run.cumulative_logprob.at({"b", 0}), run.cumulative_logprob.at({"b", 1}));
  EXPECT_GE(run.cumulative_logprob.at({"b", 1}), run.cumulative_logprob.at({"b", 2}));
  EXPECT_NE(run.tokens.at({"b", 1}), run.tokens.at({"b", 0}));
}

TEST_F(EngineTest, AFailedStepAbortsItsRequestsAndTheEngineGoesOn) {
  MakeBackend();
  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_TRUE(e->AddRequest("a", Prompt(1, 5), Greedy(4)).ok());
  ASSERT_TRUE(e->AddRequest("b", Prompt(2, 5), Greedy(4)).ok());
  backend_->FailNextForward(absl::InternalError("device lost"));
  std::vector<SequenceOutput> outs;
  const absl::Status st = e->Step(&outs);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  ASSERT_EQ(outs.size(), 2u);
  for (const SequenceOutput& o : outs) EXPECT_EQ(o.finish_reason, FinishReason::kAbort);
  EXPECT_FALSE(e->HasUnfinished());
  EXPECT_EQ(e->num_used_blocks(), 0);
  ASSERT_TRUE(e->AddRequest("c", Prompt(3, 5), Greedy(4)).ok());
  EXPECT_EQ(Drain(e.get()).tokens.at({"c", 0}), backend_->Continue(Prompt(3, 5), 4));
}

TEST_F(EngineTest, AFailedKvCopyFailsTheGroupsItTouched) {
  MakeBackend({.block_size = 4, .num_kv_blocks = 12, .num_swap_blocks = 64});
  EngineOptions o;
  o.preemption_mode = PreemptionMode::kSwap;
  o.watermark = 0.0;
  o.enable_prefix_caching = false;
  std::unique_ptr<Engine> e = NewEngine(o);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(e->AddRequest(std::to_string(i), Prompt(i, 6), Greedy(12)).ok());
  }
  // No request forks, so the first copies are the first swap-out: make them fail.
  backend_->FailNextCopy(absl::DataLossError("copy failed"));
  std::vector<SequenceOutput> outs;
  absl::Status failed;
  for (int i = 0; i < 200 && e->HasUnfinished() && failed.ok(); ++i) {
    outs.clear();
    failed = e->Step(&outs);
  }
  EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss);
  ASSERT_FALSE(outs.empty());
  for (const SequenceOutput& o : outs) EXPECT_EQ(o.finish_reason, FinishReason::kAbort);
  EXPECT_EQ(e->num_swapped(), 0);
  Drain(e.get());  // whatever is left runs to the end; nothing leaks
}

TEST_F(EngineTest, ARowThatCannotBeSampledAbortsOnlyItsRequest) {
  MakeBackend();
  backend_->SetRule([this](std::span<const int32_t> context, std::span<float> row) {
    std::fill(row.begin(), row.end(), 0.0f);
    row[backend_->NextToken(context)] = 20.0f;
    if (context[0] == 99) row[3] = std::nanf("");  // the "poisoned" request's logits
  });
  std::unique_ptr<Engine> e = NewEngine();
  std::vector<int32_t> poisoned = Prompt(1, 5);
  poisoned[0] = 99;
  ASSERT_TRUE(e->AddRequest("bad", poisoned, Greedy(4)).ok());
  ASSERT_TRUE(e->AddRequest("good", Prompt(7, 5), Greedy(4)).ok());
  const RunResult run = Drain(e.get());
  EXPECT_EQ(run.finish.at({"bad", 0}), FinishReason::kAbort);
  EXPECT_TRUE(run.tokens.at({"bad", 0}).empty());
  EXPECT_EQ(run.tokens.at({"good", 0}), backend_->Continue(Prompt(7, 5), 4));
}

TEST_F(EngineTest, RejectsWhatCannotRun) {
  MakeBackend({.block_size = 4, .num_kv_blocks = 16, .max_model_len = 64});
  std::unique_ptr<Engine> e = NewEngine();
  EXPECT_EQ(e->AddRequest("x", {}, Greedy(4)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->AddRequest("x", {257}, Greedy(4)).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status too_long = e->AddRequest("x", Prompt(1, 10), Greedy(60));
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_long.message()), HasSubstr("64"));
  // Two beams of 40 tokens need 2 x 10 blocks of 4; the pool has 16. Beams run together.
  SamplingParams beams = Greedy(30);
  beams.beam_width = 2;
  EXPECT_EQ(e->AddRequest("x", Prompt(1, 10), beams).code(), absl::StatusCode::kOutOfRange);
  // So do samples whose prompt logprobs are reported once, before their first tokens.
  SamplingParams scored = Greedy(30);
  scored.n = 2;
  scored.prompt_logprobs = 1;
  const absl::Status together = e->AddRequest("x", Prompt(1, 10), scored);
  EXPECT_EQ(together.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(together.message()), HasSubstr("prompt_logprobs"));
  EXPECT_FALSE(e->HasUnfinished());
}

// vLLM v1 runs every parallel sample as a request of its own. pagellm keeps a request's samples
// in one group (sharing the prompt's blocks) while the pool can hold them all; when it cannot,
// each sample runs as a group of its own, scheduled and preempted alone, with the draws it would
// have had in the group.
TEST_F(EngineTest, ParallelSamplesThePoolCannotHoldTogetherRunSeparately) {
  MakeBackend({.block_size = 4, .num_kv_blocks = 64, .max_model_len = 64});
  backend_->SetRule(SpreadRule);
  SamplingParams p = Seeded(30, 77);
  p.n = 3;
  const std::vector<int32_t> prompt = Prompt(3, 10);
  std::unique_ptr<Engine> roomy = NewEngine();
  ASSERT_TRUE(roomy->AddRequest("r", prompt, p).ok());
  const RunResult together = Drain(roomy.get());
  ASSERT_TRUE(together.step_errors.empty());
  EXPECT_EQ(roomy->stats().preemptions(), 0);

  // Each sample needs 10 blocks of 4 (10 + 30 tokens); the pool holds 16: one at a time.
  MakeBackend({.block_size = 4, .num_kv_blocks = 16, .max_model_len = 64});
  backend_->SetRule(SpreadRule);
  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_TRUE(e->AddRequest("r", prompt, p).ok());
  EXPECT_EQ(e->AddRequest("r", prompt, Greedy(2)).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(e->RequestState("r"), GroupState::kWaiting);
  std::vector<SequenceOutput> outs;
  ASSERT_TRUE(e->Step(&outs).ok());
  EXPECT_EQ(e->RequestState("r"), GroupState::kRunning);
  RunResult apart = Drain(e.get());  // checks that no block is left held
  ASSERT_TRUE(apart.step_errors.empty());
  EXPECT_GT(e->stats().preemptions(), 0) << "the samples did not compete for the pool";
  EXPECT_FALSE(e->RequestState("r").has_value());
  int distinct = 0;
  for (int32_t i = 0; i < 3; ++i) {
    std::vector<int32_t> got;
    for (const SequenceOutput& o : outs) {
      if (o.sample_index == i) got = o.new_token_ids;
    }
    const auto& rest = apart.tokens.at({"r", i});
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_EQ(got, together.tokens.at({"r", i})) << "sample " << i;
    EXPECT_EQ(apart.finish.at({"r", i}), FinishReason::kLength);
    distinct += together.tokens.at({"r", i}) != together.tokens.at({"r", 0});
  }
  EXPECT_GT(distinct, 0) << "the samples drew the same tokens: the streams are not tested";
  EXPECT_EQ(apart.tokens.size(), 3u);

  // Aborted, every sample goes and the id is free again.
  ASSERT_TRUE(e->AddRequest("s", prompt, p).ok());
  outs.clear();
  ASSERT_TRUE(e->Step(&outs).ok());
  EXPECT_GT(e->num_used_blocks(), 0);
  ASSERT_TRUE(e->Abort("s").ok());
  EXPECT_FALSE(e->HasUnfinished());
  EXPECT_EQ(e->num_used_blocks(), 0);
  EXPECT_FALSE(e->RequestState("s").has_value());
  EXPECT_EQ(e->Abort("s").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(e->AddRequest("s", prompt, Greedy(3)).ok());
  // SpreadRule's most likely token after a context of length L is L * 7 % 200.
  EXPECT_EQ(Drain(e.get()).tokens.at({"s", 0}), (std::vector<int32_t>{70, 77, 84}));
}

// vLLM's priority: refused under fcfs; under priority the smaller value runs first (one
// sequence at a time here), and every request's tokens are what they would be alone.
TEST_F(EngineTest, PriorityIsRefusedUnderFcfsAndOrdersRequestsUnderPriority) {
  MakeBackend();
  SamplingParams urgent = Greedy(3);
  urgent.priority = -1;
  {
    std::unique_ptr<Engine> e = NewEngine();
    const absl::Status refused = e->AddRequest("u", Prompt(1, 4), urgent);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(refused.message()), HasSubstr("--scheduling-policy"));
  }
  EngineOptions o;
  o.scheduling_policy = SchedulingPolicy::kPriority;
  o.max_num_seqs = 1;
  std::unique_ptr<Engine> e = NewEngine(o);
  ASSERT_TRUE(e->AddRequest("batch", Prompt(10, 4), Greedy(3)).ok());
  ASSERT_TRUE(e->AddRequest("urgent", Prompt(20, 4), urgent).ok());
  std::vector<std::string> first_seen;
  std::vector<SequenceOutput> outs;
  for (int i = 0; i < 100 && e->HasUnfinished(); ++i) {
    outs.clear();
    ASSERT_TRUE(e->Step(&outs).ok());
    for (const SequenceOutput& out : outs) {
      if (std::find(first_seen.begin(), first_seen.end(), out.request_id) == first_seen.end()) {
        first_seen.push_back(out.request_id);
      }
    }
  }
  EXPECT_EQ(first_seen, (std::vector<std::string>{"urgent", "batch"}));
  EXPECT_EQ(e->block_manager().GetStats().device_used, 0);
}

// The backend's rule for the final hidden state, normalized as the engine must (L2).
std::vector<float> Normalized(std::vector<float> v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  for (float& x : v) x = static_cast<float>(x / std::sqrt(sum));
  return v;
}

TEST_F(EngineTest, AnEmbeddingRequestReturnsItsPromptsNormalizedLastHiddenState) {
  MakeBackend({.block_size = 4, .num_kv_blocks = 64});
  EngineOptions o;
  o.max_num_batched_tokens = 16;  // the 40-token prompt prefills in chunks
  o.max_model_len = 48;
  std::unique_ptr<Engine> e = NewEngine(o);
  SamplingParams embed;
  embed.embed = true;
  embed.max_tokens = 40;  // ignored: an embedding generates nothing
  const std::vector<std::vector<int32_t>> prompts = {Prompt(3, 1), Prompt(7, 9), Prompt(11, 40)};
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(e->AddRequest("e" + std::to_string(i), prompts[i], embed).ok());
  }
  ASSERT_TRUE(e->AddRequest("g", Prompt(5, 6), Greedy(8)).ok());  // generation beside them
  std::map<std::string, std::vector<float>> embeddings;
  std::vector<int32_t> generated;
  for (int step = 0; step < 100 && e->HasUnfinished(); ++step) {
    std::vector<SequenceOutput> outs;
    ASSERT_TRUE(e->Step(&outs).ok());
    for (const SequenceOutput& out : outs) {
      if (out.request_id == "g") {
        EXPECT_TRUE(out.embedding.empty());
        generated.insert(generated.end(), out.new_token_ids.begin(), out.new_token_ids.end());
        continue;
      }
      EXPECT_FALSE(embeddings.contains(out.request_id)) << "one output per embedding request";
      EXPECT_TRUE(out.new_token_ids.empty());
      EXPECT_EQ(out.finish_reason, FinishReason::kStop);
      EXPECT_TRUE(out.error.ok()) << out.error;
      embeddings[out.request_id] = out.embedding;
    }
  }
  EXPECT_FALSE(e->HasUnfinished());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<float> want = Normalized(ScriptedBackend::HiddenOf(prompts[i]));
    ASSERT_EQ(embeddings["e" + std::to_string(i)].size(), want.size());
    for (size_t j = 0; j < want.size(); ++j) {
      EXPECT_FLOAT_EQ(embeddings["e" + std::to_string(i)][j], want[j]) << i << " " << j;
    }
  }
  EXPECT_EQ(generated, backend_->Continue(Prompt(5, 6), 8));
  EXPECT_EQ(e->num_used_blocks(), 0);
  EXPECT_EQ(e->stats().generated_tokens, 8);

  // The same input again: its blocks come from the prefix cache, its embedding is the same.
  const int64_t hits = e->stats().prefix_cache_hit_tokens;
  ASSERT_TRUE(e->AddRequest("again", prompts[2], embed).ok());
  std::vector<SequenceOutput> outs;
  while (e->HasUnfinished()) ASSERT_TRUE(e->Step(&outs).ok());
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].embedding, embeddings["e2"]);
  EXPECT_GE(e->stats().prefix_cache_hit_tokens - hits, 36);
  EXPECT_EQ(e->num_used_blocks(), 0);
}

TEST_F(EngineTest, AnEmbeddingWhoseHiddenStateIsNotFiniteFailsAlone) {
  MakeBackend();
  const std::vector<int32_t> bad = Prompt(1, 5), good = Prompt(2, 5);
  backend_->SetHiddenRule([&](std::span<const int32_t> context) {
    std::vector<float> h = ScriptedBackend::HiddenOf(context);
    if (std::equal(context.begin(), context.end(), bad.begin(), bad.end())) h[1] = NAN;
    return h;
  });
  std::unique_ptr<Engine> e = NewEngine();
  SamplingParams embed;
  embed.embed = true;
  ASSERT_TRUE(e->AddRequest("bad", bad, embed).ok());
  ASSERT_TRUE(e->AddRequest("good", good, embed).ok());
  std::map<std::string, SequenceOutput> got;
  std::vector<SequenceOutput> outs;
  while (e->HasUnfinished()) {
    outs.clear();
    ASSERT_TRUE(e->Step(&outs).ok());
    for (SequenceOutput& o : outs) got[o.request_id] = std::move(o);
  }
  EXPECT_EQ(got["bad"].finish_reason, FinishReason::kAbort);
  EXPECT_EQ(got["bad"].error.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(got["bad"].embedding.empty());
  EXPECT_EQ(got["good"].finish_reason, FinishReason::kStop);
  EXPECT_EQ(got["good"].embedding.size(), 4u);
  EXPECT_EQ(e->num_used_blocks(), 0);
}

TEST_F(EngineTest, AnEmbeddingRequestRefusesWhatOnlyGenerationHas) {
  MakeBackend();
  EngineOptions o;
  o.max_model_len = 32;
  std::unique_ptr<Engine> e = NewEngine(o);
  SamplingParams embed;
  embed.embed = true;
  embed.max_tokens = 32;
  // Only the input counts against the context: 32 tokens fit, 33 do not.
  EXPECT_TRUE(e->AddRequest("fits", Prompt(1, 32), embed).ok());
  const absl::Status too_long = e->AddRequest("long", Prompt(1, 33), embed);
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.message(), HasSubstr("maximum model length of 32"));
  SamplingParams p = embed;
  p.n = 2;
  EXPECT_THAT(e->AddRequest("n", Prompt(1, 4), p).message(), HasSubstr("n > 1"));
  p = embed;
  p.logprobs = 1;
  EXPECT_THAT(e->AddRequest("lp", Prompt(1, 4), p).message(), HasSubstr("logprobs"));
  p = embed;
  p.beam_width = 2;
  p.temperature = 0;
  EXPECT_THAT(e->AddRequest("beam", Prompt(1, 4), p).message(), HasSubstr("beam search"));
  p = embed;
  p.structured_output.kind = StructuredOutput::Kind::kJsonObject;
  EXPECT_THAT(e->AddRequest("json", Prompt(1, 4), p).message(), HasSubstr("structured output"));
  const RunResult run = Drain(e.get());  // "fits" runs; nothing leaks
  EXPECT_EQ(run.finish.at({"fits", 0}), FinishReason::kStop);
}

TEST_F(EngineTest, MaxModelLenIsAtMostTheModelsContextAndWhatThePoolHolds) {
  // 8 blocks of 4 (a 1% watermark keeps none of 8 back) hold 32 tokens, not the model's 64.
  MakeBackend({.block_size = 4, .num_kv_blocks = 8, .max_model_len = 64});
  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->max_model_len(), 32);
  // So a request the limit admits always fits the pool alone: 10 + 22 tokens run to the end.
  ASSERT_TRUE(e->AddRequest("fits", Prompt(1, 10), Greedy(22)).ok());
  const RunResult run = Drain(e.get());
  EXPECT_EQ(run.tokens.at({"fits", 0}).size(), 22u);
  EXPECT_EQ(e->AddRequest("x", Prompt(1, 10), Greedy(23)).code(),
            absl::StatusCode::kInvalidArgument);
  // An explicit limit the pool cannot hold is refused, naming the largest that fits.
  EngineOptions o;
  o.max_model_len = 48;
  const auto refused = Engine::Create(backend_.get(), tokenizer_.get(), o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("at most 32"));
  o.max_model_len = 32;
  EXPECT_EQ(NewEngine(o)->max_model_len(), 32);
  o.max_model_len = 20;
  EXPECT_EQ(NewEngine(o)->max_model_len(), 20);
  // Beyond the model's own context (64 positions) is refused too, not clamped.
  o.max_model_len = 65;
  const auto beyond = Engine::Create(backend_.get(), tokenizer_.get(), o);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(beyond.status().message()), HasSubstr("context length of 64"));
  // A watermark that keeps the whole pool back leaves nothing to run.
  o.max_model_len = 0;
  o.watermark = 1.0;
  EXPECT_EQ(Engine::Create(backend_.get(), tokenizer_.get(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// More adapters than host memory holds (EngineOptions::max_cpu_loras): a request for one whose
// weights were let go waits outside the scheduler while they are read again (the test answers
// the reads by hand), and ends with the read's error if it fails.
TEST_F(EngineTest, ARequestWaitsForItsAdapterToBeReadAgain) {
  ScriptedBackendOptions bo;
  bo.adapter_slots = 1;
  MakeBackend(bo);
  EngineOptions o;
  o.max_cpu_loras = 1;
  std::unique_ptr<Engine> e = NewEngine(o);
  struct Read {
    int32_t id;
    uint64_t ticket;
    std::string name, path;
  };
  std::vector<Read> reads;
  e->set_adapter_reader([&](int32_t id, uint64_t ticket, const LoraModuleSpec& spec) {
    reads.push_back({id, ticket, spec.name, spec.path});
  });
  auto adapter = [](const std::string& name) {
    auto a = std::make_shared<LoraAdapter>();
    a->name = name;
    a->path = "/adapters/" + name;
    return a;
  };
  ASSERT_TRUE(e->LoadAdapter(adapter("a")).ok());
  ASSERT_TRUE(e->LoadAdapter(adapter("b")).ok());  // a lets go of its weights
  EXPECT_TRUE(reads.empty());

  SamplingParams with_a = Greedy(5);
  with_a.lora_adapter = "a";
  ASSERT_TRUE(e->AddRequest("r1", Prompt(1, 6), with_a).ok());
  EXPECT_FALSE(e->HasUnfinished());  // nothing to step until a is read
  EXPECT_EQ(e->num_waiting(), 1);
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].name, "a");
  EXPECT_EQ(reads[0].path, "/adapters/a");
  // Cancelled while it waits: gone, and the read's result is simply kept.
  ASSERT_TRUE(e->Abort("r1").ok());
  EXPECT_EQ(e->num_waiting(), 0);
  std::vector<std::string> failed;
  e->AdapterRead(reads[0].id, reads[0].ticket, adapter("a"), &failed);
  EXPECT_TRUE(failed.empty());

  // b was let go for a's read. Its read fails: its request ends with the read's error.
  SamplingParams with_b = Greedy(5);
  with_b.lora_adapter = "b";
  ASSERT_TRUE(e->AddRequest("r2", Prompt(2, 6), with_b).ok());
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[1].name, "b");
  e->AdapterRead(reads[1].id, reads[1].ticket + 1, adapter("b"), &failed);  // not its ticket
  EXPECT_TRUE(failed.empty());
  EXPECT_EQ(e->num_waiting(), 1);
  e->AdapterRead(reads[1].id, reads[1].ticket, absl::NotFoundError("gone"), &failed);
  EXPECT_EQ(failed, std::vector<std::string>{"r2"});
  EXPECT_FALSE(e->RequestState("r2").has_value());
  EXPECT_EQ(e->num_waiting(), 0);

  // Asked for again, b is read again and its requests run (with a base request beside them).
  ASSERT_TRUE(e->AddRequest("r3", Prompt(3, 6), with_b).ok());
  ASSERT_TRUE(e->AddRequest("r4", Prompt(3, 6), with_b).ok());  // one read for both
  ASSERT_TRUE(e->AddRequest("base", Prompt(4, 6), Greedy(5)).ok());
  ASSERT_EQ(reads.size(), 3u);
  EXPECT_TRUE(e->HasUnfinished());  // the base request
  e->AdapterRead(reads[2].id, reads[2].ticket, adapter("b"), &failed);
  EXPECT_EQ(failed.size(), 1u);  // r2 only, from before
  const RunResult run = Drain(e.get());
  ASSERT_TRUE(run.step_errors.empty()) << run.step_errors.front();
  // The scripted model computes adapter rows as the base model's.
  EXPECT_EQ(run.tokens.at({"r3", 0}), backend_->Continue(Prompt(3, 6), 5));
  EXPECT_EQ(run.tokens.at({"r4", 0}), backend_->Continue(Prompt(3, 6), 5));
  EXPECT_EQ(run.tokens.at({"base", 0}), backend_->Continue(Prompt(4, 6), 5));
  EXPECT_EQ(e->stats().lora_adapter_reads, 3);
  EXPECT_EQ(reads.size(), 3u);
}

}  // namespace
}  // namespace pagellm
