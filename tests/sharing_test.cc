// Block sharing end to end on the default model: parallel samples share the prompt's blocks,
// a shared prefix is served from the prefix cache without changing the output, and a long
// prompt prefilled in chunks gives the output of one unchunked prefill.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagellm {
namespace {

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

class SharingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PAGELLM_SKIP_WITHOUT_MODEL(kModel);
    CpuBackendOptions o;
    o.threads = 2;
    o.num_kv_blocks = 600;
    o.max_batch_tokens = 4096;
    auto m = testing::OpenModel(kModel, o);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }

  // The first `n` token ids of a long synthetic text.
  std::vector<int32_t> LongIds(size_t n, const std::string& seed_word = "river") const {
    std::string text;
    std::vector<int32_t> ids;
    for (int i = 0; ids.size() < n; ++i) {
      for (int j = 0; j < 50; ++j, ++i) {
        text += "Note " + std::to_string(i) + ": the " + seed_word + " near station " +
                std::to_string(i * 7 % 101) + " was measured again. ";
      }
      ids = model_.tokenizer->Encode(text, true, false);
    }
    ids.resize(n);
    return ids;
  }

  testing::EngineRun Run(const EngineOptions& eo,
                         const std::vector<std::pair<std::vector<int32_t>, SamplingParams>>& reqs,
                         bool one_at_a_time = false) {
    auto engine = Engine::Create(model_.backend.get(), model_.tokenizer.get(), eo);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return {};
    testing::EngineRun all;
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_TRUE((*engine)->AddRequest(std::to_string(i), reqs[i].first, reqs[i].second).ok());
      if (one_at_a_time || i + 1 == reqs.size()) {
        auto run = testing::RunEngine(engine->get());
        EXPECT_TRUE(run.ok()) << run.status();
        if (!run.ok()) return {};
        all.tokens.insert(run->tokens.begin(), run->tokens.end());
        all.stats = run->stats;
      }
    }
    return all;
  }

  testing::TestModel model_;
};

SamplingParams Greedy(int32_t max_tokens) { return testing::GreedyParams(max_tokens); }

TEST_F(SharingTest, ParallelSamplesShareThePromptBlocks) {
  const std::vector<int32_t> prompt = LongIds(200);
  SamplingParams one = Greedy(16);
  SamplingParams four = one;
  four.temperature = 0.8f;
  four.seed = 5;
  four.n = 4;
  const testing::EngineRun single = Run({}, {{prompt, one}});
  const testing::EngineRun parallel = Run({}, {{prompt, four}});
  ASSERT_EQ(parallel.tokens.size(), 4u);
  // 200 + 16 tokens: 14 blocks alone. Four samples share the 12 full prompt blocks and each
  // owns its last two (the partial prompt block is copied on write).
  EXPECT_EQ(single.stats.peak_used_blocks, 14);
  EXPECT_LT(parallel.stats.peak_used_blocks, 1.5 * single.stats.peak_used_blocks);
  EXPECT_EQ(parallel.stats.computed_prompt_tokens, 200);  // the prompt is computed once
  std::printf("peak blocks: n=1 %lld, n=4 %lld (ratio %.2f)\n",
              static_cast<long long>(single.stats.peak_used_blocks),
              static_cast<long long>(parallel.stats.peak_used_blocks),
              static_cast<double>(parallel.stats.peak_used_blocks) /
                  static_cast<double>(single.stats.peak_used_blocks));
}

TEST_F(SharingTest, ASharedPrefixIsComputedOnceAndChangesNothing) {
  const std::vector<int32_t> prefix = LongIds(512);
  std::vector<int32_t> a = prefix, b = prefix;
  const std::vector<int32_t> sa =
      model_.tokenizer->Encode(" Question: what was measured?", false, false);
  const std::vector<int32_t> sb =
      model_.tokenizer->Encode(" Summarize the notes above in one line.", false, false);
  a.insert(a.end(), sa.begin(), sa.end());
  b.insert(b.end(), sb.begin(), sb.end());

  EngineOptions cached;
  const testing::EngineRun first = Run(cached, {{a, Greedy(12)}});
  const testing::EngineRun both = Run(cached, {{a, Greedy(12)}, {b, Greedy(12)}}, true);
  // The second request computes its suffix and at most one block more.
  const int64_t second = both.stats.computed_prompt_tokens - first.stats.computed_prompt_tokens;
  EXPECT_LE(second, static_cast<int64_t>(sb.size()) + 16);
  EXPECT_GE(both.stats.prefix_cache_hit_tokens, 512 - 16);
  std::printf("second request computed %lld prompt tokens (suffix %zu), hits %lld\n",
              static_cast<long long>(second), sb.size(),
              static_cast<long long>(both.stats.prefix_cache_hit_tokens));

  EngineOptions uncached;
  uncached.enable_prefix_caching = false;
  const testing::EngineRun plain = Run(uncached, {{b, Greedy(12)}});
  EXPECT_EQ(plain.stats.prefix_cache_hit_tokens, 0);
  EXPECT_EQ(both.tokens.at({"1", 0}), plain.tokens.at({"0", 0}));
}

TEST_F(SharingTest, ChunkedPrefillOfALongPromptMatchesOneShot) {
  const std::vector<int32_t> prompt = LongIds(4000, "harbor");
  EngineOptions chunked;
  chunked.max_num_batched_tokens = 512;
  chunked.enable_prefix_caching = false;
  EngineOptions whole = chunked;
  whole.max_num_batched_tokens = 4096;
  const testing::EngineRun a = Run(chunked, {{prompt, Greedy(8)}});
  const testing::EngineRun b = Run(whole, {{prompt, Greedy(8)}});
  EXPECT_EQ(a.stats.steps, 8 + 7);  // 4000 / 512 -> 8 prefill steps, then 7 decodes
  EXPECT_EQ(b.stats.steps, 1 + 7);
  ASSERT_EQ(a.tokens.at({"0", 0}).size(), 8u);
  EXPECT_EQ(a.tokens, b.tokens);
}

}  // namespace
}  // namespace pagellm
