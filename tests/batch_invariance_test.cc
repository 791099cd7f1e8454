// Batch invariance: the same prompts give identical greedy tokens whether run one at a time or
// all together, at KV block sizes 1, 8, 16 and 32, and with prefill chunked into 7-token steps;
// for the Q4_1 model (integer kernels, fp16 KV) and its F32 conversion (BLAS, fp32 KV).
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagellm {
namespace {

const char* const kPrompts[] = {
    "The capital of France is",
    "def fibonacci(n):",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a small village by the sea,",
    "Les fleurs du jardin sont",
    "SELECT name, age FROM users WHERE",
    "1, 2, 3, 5, 8, 13,",
    "A haiku about autumn leaves:",
};

struct Param {
  const char* model;
  int64_t block_size;
};

class BatchInvarianceTest : public ::testing::TestWithParam<Param> {};

TEST_P(BatchInvarianceTest, AloneEqualsTogetherEqualsChunked) {
  const Param p = GetParam();
  PAGELLM_SKIP_WITHOUT_MODEL(p.model);
  CpuBackendOptions o;
  o.threads = 2;
  o.block_size = p.block_size;
  o.num_kv_blocks = 2048 / p.block_size + 64;
  auto m = testing::OpenModel(p.model, o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::vector<int32_t>> prompts;
  for (const char* s : kPrompts) prompts.push_back(m->tokenizer->Encode(s, true, true));
  auto alone = testing::GreedyGenerate(m->backend.get(), m->tokenizer.get(), prompts, 24, false);
  ASSERT_TRUE(alone.ok()) << alone.status();
  auto together = testing::GreedyGenerate(m->backend.get(), m->tokenizer.get(), prompts, 24, true);
  ASSERT_TRUE(together.ok()) << together.status();
  EngineOptions chunked;
  chunked.max_num_batched_tokens = 7;
  auto small =
      testing::GreedyGenerate(m->backend.get(), m->tokenizer.get(), prompts, 24, true, chunked);
  ASSERT_TRUE(small.ok()) << small.status();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ((*alone)[i].size(), 24u);
    EXPECT_EQ((*alone)[i], (*together)[i]) << "prompt " << i;
    EXPECT_EQ((*alone)[i], (*small)[i]) << "prompt " << i << " (chunked prefill)";
  }
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, BatchInvarianceTest,
                         ::testing::Values(Param{"models/SmolLM2-135M-Instruct.Q4_1.gguf", 1},
                                           Param{"models/SmolLM2-135M-Instruct.Q4_1.gguf", 8},
                                           Param{"models/SmolLM2-135M-Instruct.Q4_1.gguf", 16},
                                           Param{"models/SmolLM2-135M-Instruct.Q4_1.gguf", 32},
                                           Param{"models/SmolLM2-135M-Instruct.F32.gguf", 1},
                                           Param{"models/SmolLM2-135M-Instruct.F32.gguf", 8},
                                           Param{"models/SmolLM2-135M-Instruct.F32.gguf", 16},
                                           Param{"models/SmolLM2-135M-Instruct.F32.gguf", 32}),
                         [](const auto& info) {
                           return std::string(std::string(info.param.model).find("F32") !=
                                                      std::string::npos
                                                  ? "f32"
                                                  : "q4_1") +
                                  "_bs" + std::to_string(info.param.block_size);
                         });

}  // namespace
}  // namespace pagellm
