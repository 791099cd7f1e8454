// Preemption is invisible: with a KV pool far too small for the batch, requests are preempted
// (by swap or by recompute) many times and still produce exactly the tokens of an unconstrained
// run -- greedy, and seeded sampling with n = 4. Also: a tiny swap space falls back to
// recompute, and aborting a request in every state (waiting, mid-prefill, decoding, swapped
// out) leaves no block held.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagellm {
namespace {

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

// 32 prompts of 8-14 tokens.
std::vector<std::string> Prompts() {
  const char* subjects[] = {"France", "Italy",  "the moon", "Python",  "a cat", "the ocean",
                            "music",  "winter", "bread",    "a river", "chess", "the sun",
                            "trains", "coffee", "a forest", "math"};
  std::vector<std::string> out;
  for (const char* s : subjects) {
    out.push_back(std::string("Tell me something about ") + s + ".");
    out.push_back(std::string("Write one sentence about ") + s + " and why it matters to people.");
  }
  return out;
}

class PreemptionTest : public ::testing::Test {
 protected:
  void SetUp() override { PAGELLM_SKIP_WITHOUT_MODEL(kModel); }

  // A backend with `num_kv_blocks` blocks (0: roomy) and `swap_blocks` swap blocks.
  static testing::TestModel Open(int64_t num_kv_blocks, int64_t swap_blocks) {
    CpuBackendOptions o;
    o.threads = 2;
    o.num_kv_blocks = num_kv_blocks > 0 ? num_kv_blocks : 1024;
    const absl::StatusOr<int64_t> block_bytes = testing::KvBlockBytes(kModel, o.block_size);
    EXPECT_TRUE(block_bytes.ok()) << block_bytes.status();
    o.swap_space_bytes = swap_blocks * block_bytes.value_or(0);
    auto m = testing::OpenModel(kModel, o);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : testing::TestModel{};
  }

  static testing::EngineRun Run(const testing::TestModel& m, const SamplingParams& p,
                                PreemptionMode mode, size_t num_prompts = 32) {
    EngineOptions eo;
    eo.preemption_mode = mode;
    std::vector<std::string> prompts = Prompts();
    prompts.resize(num_prompts);
    auto run = testing::RunPrompts(m, eo, prompts, p);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? std::move(*run) : testing::EngineRun{};
  }
};

SamplingParams Greedy(int32_t max_tokens) { return testing::GreedyParams(max_tokens); }

SamplingParams SeededN4(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.seed = 1234;
  p.n = 4;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

TEST_F(PreemptionTest, GreedyOutputsSurviveSwapAndRecompute) {
  const SamplingParams p = Greedy(32);
  const testing::EngineRun roomy = Run(Open(0, 0), p, PreemptionMode::kAuto);
  ASSERT_EQ(roomy.tokens.size(), 32u);
  EXPECT_EQ(roomy.stats.preemptions(), 0);
  // 32 sequences of ~42 tokens need ~96 blocks; the pool has 32 (31 recompute and 36 swap
  // preemptions when this was written).
  const testing::TestModel tight = Open(32, 4096);
  for (PreemptionMode mode : {PreemptionMode::kSwap, PreemptionMode::kRecompute}) {
    const testing::EngineRun run = Run(tight, p, mode);
    SCOPED_TRACE(mode == PreemptionMode::kSwap ? "swap" : "recompute");
    EXPECT_GE(run.stats.preemptions(), 20);
    std::printf("%s: %lld preemptions\n", mode == PreemptionMode::kSwap ? "swap" : "recompute",
                static_cast<long long>(run.stats.preemptions()));
    if (mode == PreemptionMode::kSwap) {
      EXPECT_EQ(run.stats.preemptions_swap, run.stats.preemptions());
      EXPECT_GT(run.stats.swapped_out_blocks, 0);
      EXPECT_EQ(run.stats.swapped_in_blocks, run.stats.swapped_out_blocks);
    } else {
      EXPECT_EQ(run.stats.preemptions_recompute, run.stats.preemptions());
      EXPECT_GT(run.stats.computed_prompt_tokens, roomy.stats.computed_prompt_tokens);
    }
    EXPECT_EQ(run.tokens, roomy.tokens);
  }
}

TEST_F(PreemptionTest, SeededParallelSamplesSurvivePreemption) {
  const SamplingParams p = SeededN4(24);
  const testing::EngineRun roomy = Run(Open(0, 0), p, PreemptionMode::kAuto);
  ASSERT_EQ(roomy.tokens.size(), 32u * 4);
  // The four samples of a request differ (their own streams), and none is empty. Not with the
  // GPU check's reference checkpoints (PAGELLM_TEST_MODEL; tools/gpu/hf_reference.py): their
  // next-token margins are far above any temperature, so every sample is the greedy one (seen in
  // the CUDA emulator); the comparison below still holds there.
  if (testing::TestModelPath(kModel) == kModel) {
    EXPECT_NE(roomy.tokens.at({"0", 0}), roomy.tokens.at({"0", 1}));
  }
  const testing::TestModel tight = Open(60, 4096);
  for (PreemptionMode mode : {PreemptionMode::kAuto, PreemptionMode::kRecompute}) {
    const testing::EngineRun run = Run(tight, p, mode);
    EXPECT_GE(run.stats.preemptions(), 20);
    std::printf("n=4, %s: %lld preemptions\n", mode == PreemptionMode::kAuto ? "auto" : "recompute",
                static_cast<long long>(run.stats.preemptions()));
    EXPECT_EQ(run.tokens, roomy.tokens);
  }
}

TEST_F(PreemptionTest, ATinySwapSpaceFallsBackToRecompute) {
  const SamplingParams p = SeededN4(24);
  const testing::EngineRun roomy = Run(Open(0, 0), p, PreemptionMode::kAuto, 12);
  const testing::EngineRun run = Run(Open(40, 2), p, PreemptionMode::kSwap, 12);
  EXPECT_GT(run.stats.swap_fallbacks, 0);
  EXPECT_EQ(run.tokens, roomy.tokens);
}

TEST_F(PreemptionTest, AbortInEveryStateFreesEveryBlock) {
  const testing::TestModel m = Open(24, 4096);
  EngineOptions eo;
  eo.preemption_mode = PreemptionMode::kSwap;
  eo.max_num_batched_tokens = 16;
  auto engine = Engine::Create(m.backend.get(), m.tokenizer.get(), eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  Engine* e = engine->get();
  SamplingParams p = SeededN4(40);
  const std::vector<std::string> prompts = Prompts();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(
        e->AddRequest(std::to_string(i), m.tokenizer->Encode(prompts[i], true, false), p).ok());
  }
  // A long prompt that needs several 16-token chunks.
  std::string long_prompt;
  for (int i = 0; i < 8; ++i) long_prompt += prompts[i] + " ";
  ASSERT_TRUE(e->AddRequest("long", m.tokenizer->Encode(long_prompt, true, false), Greedy(4)).ok());
  std::vector<SequenceOutput> outs;
  bool aborted_swapped = false, aborted_running = false;
  for (int step = 0; step < 2000 && e->HasUnfinished(); ++step) {
    ASSERT_TRUE(e->Step(&outs).ok());
    if (!aborted_swapped && e->num_swapped() > 0) {
      // The latest arrival is the one swapped out; abort whichever group is out.
      for (int i = 5; i >= 0 && !aborted_swapped; --i) {
        const int64_t before = e->num_swapped();
        if (e->Abort(std::to_string(i)).ok()) aborted_swapped = e->num_swapped() < before;
      }
    }
    if (!aborted_running && step == 3) aborted_running = e->Abort("0").ok();
  }
  EXPECT_TRUE(aborted_swapped);
  EXPECT_TRUE(aborted_running);
  EXPECT_FALSE(e->HasUnfinished());
  EXPECT_EQ(e->block_manager().GetStats().device_used, 0);
  EXPECT_EQ(e->block_manager().GetStats().swap_used, 0);

  // Waiting and mid-prefill (a new long prompt: the first one's blocks are in the prefix cache).
  std::string other_long;
  for (int i = 8; i < 16; ++i) other_long += prompts[i] + " ";
  ASSERT_TRUE(e->AddRequest("long", m.tokenizer->Encode(other_long, true, false), Greedy(4)).ok());
  ASSERT_TRUE(e->AddRequest("queued", m.tokenizer->Encode(prompts[1], true, false), p).ok());
  outs.clear();
  ASSERT_TRUE(e->Step(&outs).ok());
  EXPECT_TRUE(outs.empty());  // "long" is mid-prefill, "queued" has no budget left
  EXPECT_EQ(e->num_waiting(), 1);
  EXPECT_GT(e->num_used_blocks(), 0);
  EXPECT_TRUE(e->Abort("queued").ok());
  EXPECT_TRUE(e->Abort("long").ok());
  EXPECT_EQ(e->num_used_blocks(), 0);
  EXPECT_FALSE(e->HasUnfinished());
}

}  // namespace
}  // namespace pagellm
