// Fidelity against llama.cpp: the default model converted to F32 (tools/convert/gguf_to_f32.py)
// must continue 24 varied prompts exactly as llama.cpp does (greedy, 64 tokens), and agree on
// the top-1 token under teacher forcing. The reference is tests/data/fidelity/
// llamacpp_smollm2.json, made by tools/fixtures/make_llamacpp_fixture.py with llama-cpp-python.
//
// The same on the Q4_K_M file llama.cpp's quantizer makes from it (tools/convert/
// llamacpp_quantize.py; tools/prepare_models.sh makes it when llama-cpp-python is installed, and
// the cases skip without it): Q5_0, Q8_0, Q4_K and Q6_K weights, which pagellm multiplies in
// its own integer kernels. There llama.cpp quantizes activations per 256 elements for K-quants
// (pagellm per 32) and its batched and one-token kernels differ (its own teacher-forced top-1
// disagrees with its greedy run 55 times in the fixture), so near-ties go either way and whole
// continuations rarely stay identical: the bars are the mean common prefix (measured 26.6 of
// 64), top-1 agreement (95.7%) and agreement where llama.cpp is confident (1760/1760). Against
// the exact product of the same weights (the file dequantized to F32, run in fp32), pagellm's
// continuations stay closer than llama.cpp's: tools/bench/quant_fidelity.py.
//
// And the F32 file with --dtype bfloat16 (weights rounded to bf16 at load) against the same fp32
// reference, with bars for what bf16 rounding costs (on AMX the activations are rounded too).
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace pagellm {
namespace {

struct FidelityCase {
  const char* name;
  const char* model;
  const char* fixture;
  int min_identical_percent;       // greedy 64-token continuations identical to llama.cpp's
  int min_mean_prefix;             // mean tokens before a continuation leaves llama.cpp's
  int min_top1_percent;            // teacher-forced top-1 agreement
  int min_confident_top1_percent;  // the same where llama.cpp's top-2 trails by >= 0.5 logits
  bool optional;  // made only where the reference tools are installed: skipped when absent
  const char* dtype = "auto";          // CpuBackendOptions::dtype
  const char* kv_cache_dtype = "f32";  // as the reference (type_k/type_v f32)
  bool greedy = true;  // run GreedyContinuationsMatchLlamaCpp (the fp8 caches' cost is measured
                       // by teacher forcing; their continuations' bars are in the comment)
};

class FidelityTest : public ::testing::TestWithParam<FidelityCase> {
 protected:
  void SetUp() override {
    if (GetParam().optional && !testing::PathExists(testing::TestModelPath(GetParam().model))) {
      GTEST_SKIP() << GetParam().model
                   << " is missing (tools/prepare_models.sh makes it after tools/setup.sh "
                      "--reference)";
    }
    PAGELLM_SKIP_WITHOUT_MODEL(GetParam().model);
    std::ifstream in(GetParam().fixture);
    ASSERT_TRUE(in) << GetParam().fixture;
    fixture_ = nlohmann::json::parse(in);
    CpuBackendOptions o;
    o.threads = 2;
    o.kv_cache_dtype = GetParam().kv_cache_dtype;
    o.num_kv_blocks = 512;
    o.dtype = GetParam().dtype;
    auto m = testing::OpenModel(GetParam().model, o);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }
  nlohmann::json fixture_;
  testing::TestModel model_;
};

TEST_P(FidelityTest, PromptTokenizationMatchesLlamaCpp) {
  for (const auto& c : fixture_["cases"]) {
    auto ids = model_.tokenizer->Encode(c["prompt"].get<std::string>(), true, true);
    EXPECT_EQ(ids, c["prompt_ids"].get<std::vector<int32_t>>()) << c["name"];
  }
}

TEST_P(FidelityTest, GreedyContinuationsMatchLlamaCpp) {
  if (!GetParam().greedy) GTEST_SKIP() << "measured by teacher forcing only";
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
  size_t prefix_sum = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    size_t k = 0;
    while (k < want[i].size() && k < (*got)[i].size() && (*got)[i][k] == want[i][k]) ++k;
    prefix_sum += k;
    if ((*got)[i] == want[i]) {
      ++identical;
    } else {
      std::printf("case %s diverges from llama.cpp at token %zu\n",
                  fixture_["cases"][i]["name"].get<std::string>().c_str(), k);
    }
  }
  const double mean_prefix = static_cast<double>(prefix_sum) / prompts.size();
  std::printf(
      "greedy 64-token continuations identical to llama.cpp: %d/%zu, mean common prefix "
      "%.1f tokens\n",
      identical, prompts.size(), mean_prefix);
  EXPECT_GE(mean_prefix, GetParam().min_mean_prefix);
  EXPECT_GE(identical * 100, static_cast<int>(prompts.size()) * GetParam().min_identical_percent);
}

TEST_P(FidelityTest, TeacherForcedTop1AgreesWithLlamaCpp) {
  testing::Top1Agreement a;
  for (const auto& c : fixture_["cases"]) {
    std::vector<int32_t> tokens = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    tokens.insert(tokens.end(), greedy.begin(), greedy.end());
    const absl::Status st = testing::AddTop1Agreement(
        model_.backend.get(), tokens, c["tf_top1"].get<std::vector<int32_t>>(),
        c["tf_margin"].get<std::vector<double>>(), 0.5, &a);
    ASSERT_TRUE(st.ok()) << st;
  }
  const auto [agree, total, confident_agree, confident] = a;
  std::printf(
      "teacher-forced top-1 agreement with llama.cpp: %lld/%lld, where its margin is "
      ">= 0.5: %lld/%lld\n",
      static_cast<long long>(agree), static_cast<long long>(total),
      static_cast<long long>(confident_agree), static_cast<long long>(confident));
  EXPECT_GE(agree * 100, total * GetParam().min_top1_percent);
  EXPECT_GE(confident_agree * 100, confident * GetParam().min_confident_top1_percent);
}

INSTANTIATE_TEST_SUITE_P(
    Models, FidelityTest,
    ::testing::Values(FidelityCase{"F32", "models/SmolLM2-135M-Instruct.F32.gguf",
                                   "tests/data/fidelity/llamacpp_smollm2.json", 90, 60, 99, 100,
                                   false},
                      FidelityCase{"Q4_K_M", "models/SmolLM2-135M-Instruct.Q4_K_M.gguf",
                                   "tests/data/fidelity/llamacpp_smollm2_q4_k_m.json", 0, 16, 93,
                                   99, true},
                      // --dtype bfloat16: the F32 weights rounded to bf16, against llama.cpp's fp32
                      // run; near-ties flip. Measured with fp32 activations (no AMX): 21/24
                      // identical, mean prefix 59.2, top-1 2216/2221, confident 1764/1764; with
                      // AMX (bf16 activations): 17/24, 52.0, 2211/2221, 1764/1764.
                      FidelityCase{"F32_as_bf16", "models/SmolLM2-135M-Instruct.F32.gguf",
                                   "tests/data/fidelity/llamacpp_smollm2.json", 60, 45, 99, 100,
                                   false, "bfloat16"},
                      // --kv-cache-dtype fp8_e4m3 / fp8_e5m2: keys and values rounded to 8-bit
                      // floats (common/fp8.h, unscaled as vLLM's default) under llama.cpp's fp32
                      // run (on this 135M model; no larger one is measured here). Measured:
                      // E4M3 6/24 identical, mean prefix 29.5, top-1 2136/2221, confident
                      // 1759/1764; E5M2 0/24, 10.3, 2068/2221, 1735/1764 (an f16 cache: 24/24,
                      // 64.0, 2221/2221, 1764/1764).
                      FidelityCase{"F32_fp8_e4m3_kv", "models/SmolLM2-135M-Instruct.F32.gguf",
                                   "tests/data/fidelity/llamacpp_smollm2.json", 0, 0, 95, 99, false,
                                   "auto", "fp8_e4m3", /*greedy=*/false},
                      FidelityCase{"F32_fp8_e5m2_kv", "models/SmolLM2-135M-Instruct.F32.gguf",
                                   "tests/data/fidelity/llamacpp_smollm2.json", 0, 0, 92, 98, false,
                                   "auto", "fp8_e5m2", /*greedy=*/false}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pagellm
