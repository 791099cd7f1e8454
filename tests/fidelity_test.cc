// Fidelity against llama.cpp: the default model converted to F32 (tools/convert/gguf_to_f32.py)
// must continue 24 varied prompts exactly as llama.cpp does (greedy, 64 tokens), and agree on
// the top-1 token under teacher forcing. The reference is tests/data/fidelity/
// llamacpp_smollm2.json, made by tools/fixtures/make_llamacpp_fixture.py with llama-cpp-python.
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace pagellm {
namespace {

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.F32.gguf";
constexpr char kFixture[] = "tests/data/fidelity/llamacpp_smollm2.json";

class FidelityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PAGELLM_SKIP_WITHOUT_MODEL(kModel);
    std::ifstream in(kFixture);
    ASSERT_TRUE(in) << kFixture;
    fixture_ = nlohmann::json::parse(in);
    CpuBackendOptions o;
    o.threads = 2;
    o.kv_cache_dtype = "f32";  // as the reference (type_k/type_v f32)
    o.num_kv_blocks = 512;
    auto m = testing::OpenModel(kModel, o);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }
  nlohmann::json fixture_;
  testing::TestModel model_;
};

TEST_F(FidelityTest, PromptTokenizationMatchesLlamaCpp) {
  for (const auto& c : fixture_["cases"]) {
    auto ids = model_.tokenizer->Encode(c["prompt"].get<std::string>(), true, true);
    EXPECT_EQ(ids, c["prompt_ids"].get<std::vector<int32_t>>()) << c["name"];
  }
}

TEST_F(FidelityTest, GreedyContinuationsMatchLlamaCpp) {
  std::vector<std::vector<int32_t>> prompts, want;
  for (const auto& c : fixture_["cases"]) {
    prompts.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
    want.push_back(c["greedy_ids"].get<std::vector<int32_t>>());
  }
  ASSERT_GE(prompts.size(), 20u);
  auto got = testing::GreedyGenerate(model_.backend.get(), model_.tokenizer.get(), prompts, 64,
                                     /*together=*/true);
  ASSERT_TRUE(got.ok()) << got.status();
  int identical = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if ((*got)[i] == want[i]) {
      ++identical;
    } else {
      size_t k = 0;
      while (k < want[i].size() && (*got)[i][k] == want[i][k]) ++k;
      std::printf("case %s diverges from llama.cpp at token %zu\n",
                  fixture_["cases"][i]["name"].get<std::string>().c_str(), k);
    }
  }
  std::printf("greedy 64-token continuations identical to llama.cpp: %d/%zu\n", identical,
              prompts.size());
  EXPECT_GE(identical * 10, static_cast<int>(prompts.size()) * 9);
}

TEST_F(FidelityTest, TeacherForcedTop1AgreesWithLlamaCpp) {
  int64_t agree = 0, total = 0;
  const int64_t vocab = model_.backend->config().vocab_size;
  for (const auto& c : fixture_["cases"]) {
    std::vector<int32_t> tokens = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    tokens.insert(tokens.end(), greedy.begin(), greedy.end());
    const auto top1 = c["tf_top1"].get<std::vector<int32_t>>();
    ASSERT_EQ(top1.size(), tokens.size());
    auto logits = testing::AllPositionLogits(model_.backend.get(), tokens);
    ASSERT_TRUE(logits.ok()) << logits.status();
    for (size_t i = 0; i < tokens.size(); ++i) {
      const float* row = logits->data() + i * vocab;
      int32_t best = 0;
      for (int32_t v = 1; v < vocab; ++v)
        if (row[v] > row[best]) best = v;
      agree += best == top1[i];
      ++total;
    }
  }
  std::printf("teacher-forced top-1 agreement with llama.cpp: %lld/%lld\n",
              static_cast<long long>(agree), static_cast<long long>(total));
  EXPECT_GE(agree * 100, total * 99);
}

}  // namespace
}  // namespace pagellm
