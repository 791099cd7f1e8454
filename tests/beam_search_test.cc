// Beam search against an independent reference: tests/data/beam/llamacpp_beam_smollm2.json,
// made by tools/fixtures/make_beam_fixture.py (llama.cpp's logits on the F32 conversion of the
// default model, and Hugging Face's beam search algorithm written separately in numpy). The
// fixture keeps only prompts whose every beam decision has a margin above 1e-3 in logprob, so
// the beams (token ids and order) must match exactly.
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace pagellm {
namespace {

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.F32.gguf";
constexpr char kFixture[] = "tests/data/beam/llamacpp_beam_smollm2.json";

TEST(BeamSearchReferenceTest, BeamsMatchTheReference) {
  PAGELLM_SKIP_WITHOUT_MODEL(kModel);
  std::ifstream in(kFixture);
  ASSERT_TRUE(in) << kFixture;
  const nlohmann::json fixture = nlohmann::json::parse(in);
  CpuBackendOptions o;
  o.threads = 2;
  o.num_kv_blocks = 256;
  o.kv_cache_dtype = "f32";  // as the reference
  auto m = testing::OpenModel(kModel, o);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::vector<int32_t> eos = m->tokenizer->end_of_generation_ids();
  EXPECT_EQ(std::set<int32_t>(eos.begin(), eos.end()), fixture["eos_ids"].get<std::set<int32_t>>());

  auto engine = Engine::Create(m->backend.get(), m->tokenizer.get(), EngineOptions());
  ASSERT_TRUE(engine.ok()) << engine.status();
  SamplingParams p;
  p.temperature = 0.0f;
  p.beam_width = fixture["beam_width"].get<int32_t>();
  p.max_tokens = fixture["max_tokens"].get<int32_t>();
  p.length_penalty = fixture["length_penalty"].get<float>();
  p.early_stopping = fixture["early_stopping"].get<bool>();
  const auto& cases = fixture["cases"];
  ASSERT_GE(cases.size(), 4u);
  // All cases at once: the beams of different requests share the batch.
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(
        (*engine)
            ->AddRequest(std::to_string(i), cases[i]["prompt_ids"].get<std::vector<int32_t>>(), p)
            .ok());
  }
  auto run = testing::RunEngine(engine->get());
  ASSERT_TRUE(run.ok()) << run.status();
  int eos_cases = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i]["name"].get<std::string>());
    const auto& beams = cases[i]["beams"];
    eos_cases += cases[i]["eos_occurred"].get<bool>();
    for (size_t r = 0; r < beams.size(); ++r) {
      const auto key = std::make_pair(std::to_string(i), static_cast<int32_t>(r));
      ASSERT_TRUE(run->tokens.contains(key)) << "beam " << r << " missing";
      EXPECT_EQ(run->tokens.at(key), beams[r]["token_ids"].get<std::vector<int32_t>>())
          << "beam " << r;
      EXPECT_NEAR(run->cumulative_logprob.at(key), beams[r]["cum_logprob"].get<double>(), 1e-3)
          << "beam " << r;
    }
    EXPECT_FALSE(run->tokens.contains({std::to_string(i), static_cast<int32_t>(beams.size())}));
  }
  EXPECT_GE(eos_cases, 1);  // hypotheses closed by EOS are exercised too
}

}  // namespace
}  // namespace pagellm
