// Embeddings (SamplingParams::embed, POST /v1/embeddings) against HF transformers: the default
// model converted to F32 embeds 7 inputs (a query, a passage that answers it, an unrelated
// sentence, code, Unicode, one token, 625 tokens) as vLLM's pooling runner does for a generative
// model -- the last token's final hidden state, L2-normalized -- through the engine, the inputs
// chunked and batched together with a generation request. The reference is
// tests/data/embeddings/hf_smollm2.json, made by tools/fixtures/make_embedding_fixture.py
// (transformers' hidden_states[-1] in fp32). The default Q4_1 model must stay close to it and
// rank the passage above the unrelated sentence, as the reference does.
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

constexpr char kF32[] = "models/SmolLM2-135M-Instruct.F32.gguf";
constexpr char kQ41[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr char kFixture[] = "tests/data/embeddings/hf_smollm2.json";

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

class EmbeddingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(kFixture);
    ASSERT_TRUE(in) << kFixture;
    fixture_ = nlohmann::json::parse(in);
  }

  // Embeds every fixture input with `path` (chunks of 64 tokens per step), beside a greedy
  // generation of 8 tokens; checks that tokenization matches the HF tokenizer and nothing leaks.
  std::map<std::string, std::vector<float>> Embed(const char* path, const char* kv_dtype) {
    CpuBackendOptions o;
    o.threads = 2;
    o.kv_cache_dtype = kv_dtype;
    o.num_kv_blocks = 128;
    absl::StatusOr<testing::TestModel> m = testing::OpenModel(path, o);
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return {};
    EngineOptions eo;
    eo.max_num_batched_tokens = 64;
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Create(m->backend.get(), m->tokenizer.get(), eo);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return {};
    SamplingParams embed;
    embed.embed = true;
    for (const auto& c : fixture_["cases"]) {
      const auto ids = c["ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(m->tokenizer->Encode(c["input"].get<std::string>(), /*add_special_tokens=*/true,
                                     /*parse_special=*/false),
                ids)
          << c["name"];
      EXPECT_TRUE((*engine)->AddRequest(c["name"].get<std::string>(), ids, embed).ok());
    }
    EXPECT_TRUE((*engine)->AddRequest("generate", {1, 2, 3, 4}, testing::GreedyParams(8)).ok());
    std::map<std::string, std::vector<float>> got;
    int64_t generated = 0;
    std::vector<SequenceOutput> outs;
    for (int i = 0; i < 1000 && (*engine)->HasUnfinished(); ++i) {
      outs.clear();
      EXPECT_TRUE((*engine)->Step(&outs).ok());
      for (const SequenceOutput& out : outs) {
        generated += static_cast<int64_t>(out.new_token_ids.size());
        if (!out.embedding.empty()) got[out.request_id] = out.embedding;
      }
    }
    EXPECT_FALSE((*engine)->HasUnfinished());
    EXPECT_EQ((*engine)->num_used_blocks(), 0);
    EXPECT_EQ(generated, 8);
    return got;
  }

  nlohmann::json fixture_;
};

TEST_F(EmbeddingTest, EmbeddingsMatchTransformersInFp32) {
  PAGELLM_SKIP_WITHOUT_MODEL(kF32);
  const std::map<std::string, std::vector<float>> got = Embed(kF32, "f32");
  double max_diff = 0, min_cos = 1;
  for (const auto& c : fixture_["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const auto want = c["embedding"].get<std::vector<float>>();
    ASSERT_TRUE(got.contains(name));
    const std::vector<float>& mine = got.at(name);
    ASSERT_EQ(mine.size(), want.size());
    EXPECT_NEAR(Dot(mine, mine), 1.0, 1e-5) << "unit length";
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(mine[i], want[i], 2e-5) << i;
      max_diff = std::max(max_diff, static_cast<double>(std::abs(mine[i] - want[i])));
    }
    min_cos = std::min(min_cos, Dot(mine, want));
  }
  std::printf("embeddings vs transformers fp32: %zu inputs, max |diff| %.2e, min cosine %.8f\n",
              got.size(), max_diff, min_cos);
  EXPECT_GT(min_cos, 0.99999);
}

TEST_F(EmbeddingTest, TheQuantizedModelStaysCloseAndRanksAsTheReference) {
  PAGELLM_SKIP_WITHOUT_MODEL(kQ41);
  const std::map<std::string, std::vector<float>> got = Embed(kQ41, "auto");
  std::map<std::string, std::vector<float>> ref;
  double min_cos = 1;
  for (const auto& c : fixture_["cases"]) {
    const std::string name = c["name"];
    ref[name] = c["embedding"].get<std::vector<float>>();
    ASSERT_TRUE(got.contains(name)) << name;
    min_cos = std::min(min_cos, Dot(got.at(name), ref[name]));
  }
  std::printf("embeddings Q4_1 vs transformers fp32 (F32 weights): min cosine %.5f\n", min_cos);
  EXPECT_GT(min_cos, 0.995);
  // Retrieval: the query is nearer the passage that answers it than the unrelated sentence, in
  // the reference and here.
  ASSERT_GT(Dot(ref["query"], ref["passage"]), Dot(ref["query"], ref["unrelated"]));
  EXPECT_GT(Dot(got.at("query"), got.at("passage")), Dot(got.at("query"), got.at("unrelated")));
}

}  // namespace
}  // namespace pagellm
