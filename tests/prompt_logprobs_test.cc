// Prompt logprobs against HF transformers: the default model converted to F32 scores every token
// of 8 varied prompts (prose, code, a chat turn, numbers, Unicode, an unlikely sentence) as
// transformers does in fp32 -- the logprob of each prompt token given the tokens before it, its
// rank, and the 5 most likely tokens -- through the engine, with the prompts chunked and batched
// together (SamplingParams::prompt_logprobs, what vLLM's prompt_logprobs and the OpenAI
// completions API's echo with logprobs return). The reference is
// tests/data/prompt_logprobs/hf_smollm2.json, made by
// tools/fixtures/make_prompt_logprobs_fixture.py.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"
#include "worker/engine/engine.h"

namespace pagellm {
namespace {

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.F32.gguf";
constexpr char kFixture[] = "tests/data/prompt_logprobs/hf_smollm2.json";
constexpr int kTop = 5;
// Ranks and orders are compared where the fixture's logit gaps exceed this (fp32 noise between
// two implementations is ~1e-5).
constexpr double kNearTie = 1e-3;

class PromptLogprobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PAGELLM_SKIP_WITHOUT_MODEL(kModel);
    std::ifstream in(kFixture);
    ASSERT_TRUE(in) << kFixture;
    fixture_ = nlohmann::json::parse(in);
    CpuBackendOptions o;
    o.threads = 2;
    o.kv_cache_dtype = "f32";  // as the reference
    o.num_kv_blocks = 128;
    absl::StatusOr<testing::TestModel> m = testing::OpenModel(kModel, o);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }
  nlohmann::json fixture_;
  testing::TestModel model_;
};

TEST_F(PromptLogprobsTest, TokenizationMatchesTheHfTokenizer) {
  for (const auto& c : fixture_["cases"]) {
    EXPECT_EQ(model_.tokenizer->Encode(c["prompt"].get<std::string>(), false, true),
              c["prompt_ids"].get<std::vector<int32_t>>())
        << c["name"];
  }
}

TEST_F(PromptLogprobsTest, EveryPromptTokenScoresAsInTransformers) {
  EngineOptions eo;
  eo.max_num_batched_tokens = 32;  // chunks of prompts share steps
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(model_.backend.get(), model_.tokenizer.get(), eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  SamplingParams p = testing::GreedyParams(1);
  p.prompt_logprobs = kTop;
  for (const auto& c : fixture_["cases"]) {
    ASSERT_TRUE((*engine)
                    ->AddRequest(c["name"].get<std::string>(),
                                 c["prompt_ids"].get<std::vector<int32_t>>(), p)
                    .ok());
  }
  std::map<std::string, std::vector<SampleResult>> got;
  std::vector<SequenceOutput> outs;
  for (int i = 0; i < 1000 && (*engine)->HasUnfinished(); ++i) {
    outs.clear();
    ASSERT_TRUE((*engine)->Step(&outs).ok());
    for (const SequenceOutput& o : outs) {
      got[o.request_id].insert(got[o.request_id].end(), o.prompt_logprobs.begin(),
                               o.prompt_logprobs.end());
    }
  }
  ASSERT_FALSE((*engine)->HasUnfinished());
  EXPECT_EQ((*engine)->num_used_blocks(), 0);

  double max_diff = 0;
  int64_t scored = 0, ranked = 0, ordered = 0;
  for (const auto& c : fixture_["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto logprob = c["logprob"].get<std::vector<double>>();
    const auto rank = c["rank"].get<std::vector<int32_t>>();
    const auto top_ids = c["top_ids"].get<std::vector<std::vector<int32_t>>>();
    const auto top_lp = c["top_logprobs"].get<std::vector<std::vector<double>>>();
    const auto margin = c["margin"].get<std::vector<double>>();
    const std::vector<SampleResult>& mine = got[name];
    ASSERT_EQ(mine.size(), ids.size() - 1) << "one per prompt token after the first";
    for (size_t i = 0; i < mine.size(); ++i) {
      SCOPED_TRACE(i + 1);
      const SampleResult& r = mine[i];
      EXPECT_EQ(r.token_id, ids[i + 1]);
      EXPECT_NEAR(r.logprob, logprob[i], 1e-3);
      max_diff = std::max(max_diff, std::abs(r.logprob - logprob[i]));
      ++scored;
      ASSERT_EQ(r.top_logprobs().size(), static_cast<size_t>(kTop));
      for (int k = 0; k < kTop; ++k) {
        EXPECT_NEAR(r.top_logprobs()[k].logprob, top_lp[i][k], 1e-3);
      }
      if (margin[i] < kNearTie) continue;
      EXPECT_EQ(r.rank, rank[i]);
      ++ranked;
      for (int k = 0; k < kTop; ++k) EXPECT_EQ(r.top_logprobs()[k].token_id, top_ids[i][k]);
      ++ordered;
    }
  }
  std::printf(
      "prompt logprobs vs transformers fp32: %lld tokens, max |diff| %.2e; ranks and "
      "top-%d orders compared at %lld (the rest are near ties)\n",
      static_cast<long long>(scored), max_diff, kTop, static_cast<long long>(ranked));
  EXPECT_GE(scored, 150);
  EXPECT_GE(ordered * 10, scored * 8);
}

}  // namespace
}  // namespace pagellm
