// The CPU backend's KV cache in 8-bit floats (--kv-cache-dtype fp8 / fp8_e4m3 / fp8_e5m2): the
// same memory holds twice an f16 cache's blocks, and the paged machinery (swap, copy-on-write,
// prefix sharing) moves the 1-byte elements as it moves 2-byte ones. Accuracy against llama.cpp
// is tests/fidelity_test.cc's; the conversions against ml_dtypes are common/fp8_test.cc's.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "worker/engine/engine.h"
#include "worker/engine/testing/sampling.h"

namespace pagellm {
namespace {

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

absl::StatusOr<testing::TestModel> Open(const std::string& dtype, int64_t blocks,
                                        int64_t swap_bytes = 0, int64_t kv_bytes = 0) {
  CpuBackendOptions o;
  o.threads = 2;
  o.kv_cache_dtype = dtype;
  o.num_kv_blocks = blocks;
  o.kv_cache_bytes = kv_bytes;
  o.swap_space_bytes = swap_bytes;
  return testing::OpenModel(kModel, o);
}

TEST(KvCacheDtypeTest, TheSameMemoryHoldsTwiceTheBlocks) {
  PAGELLM_SKIP_WITHOUT_MODEL(kModel);
  constexpr int64_t kBytes = 90ll << 20;
  auto f16 = Open("f16", 0, 0, kBytes);
  ASSERT_TRUE(f16.ok()) << f16.status();
  // 30 layers x 3 KV heads x 64 dims x 16 tokens, K and V: 180 KiB a block in f16.
  EXPECT_EQ(f16->backend->num_kv_blocks(), kBytes / (2 * 30 * 3 * 64 * 16 * 2));
  for (const char* fp8 : {"fp8", "fp8_e4m3", "fp8_e5m2"}) {
    auto m = Open(fp8, 0, 0, kBytes);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->backend->num_kv_blocks(), 2 * f16->backend->num_kv_blocks()) << fp8;
  }
  const auto bad = Open("fp4", 16);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fp8_e5m2"), std::string::npos) << bad.status();
}

// Greedy tokens do not depend on the batch, on preemption or on sharing (the cache's values are
// a pure function of the token's keys and values), in either fp8 format: a pool that must swap
// or recompute gives a roomy pool's tokens, n = 2 samples share their prompt's blocks, and no
// block is left held (RunPrompts checks).
TEST(KvCacheDtypeTest, PreemptionAndSharingLeaveTheTokensAlone) {
  PAGELLM_SKIP_WITHOUT_MODEL(kModel);
  const std::vector<std::string> prompts = {"The history of the bicycle begins",
                                            "Write a haiku about the sea.",
                                            "def fibonacci(n):",
                                            "Three facts about Mars:",
                                            "Once upon a time, in a village by a river,",
                                            "The recipe calls for"};
  SamplingParams p = testing::GreedyParams(32);
  p.n = 2;
  for (const char* dtype : {"fp8_e4m3", "fp8_e5m2"}) {
    SCOPED_TRACE(dtype);
    auto roomy = Open(dtype, 256);
    ASSERT_TRUE(roomy.ok()) << roomy.status();
    auto want = testing::RunPrompts(*roomy, EngineOptions(), prompts, p);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(want->stats.preemptions(), 0);
    for (PreemptionMode mode : {PreemptionMode::kSwap, PreemptionMode::kRecompute}) {
      // 16 blocks of 16 tokens: not all six requests' two samples at once.
      auto tight = Open(dtype, 16, /*swap_bytes=*/64ll << 20);
      ASSERT_TRUE(tight.ok()) << tight.status();
      EngineOptions eo;
      eo.preemption_mode = mode;
      auto got = testing::RunPrompts(*tight, eo, prompts, p);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_GT(got->stats.preemptions(), 0) << "the pool was meant to be too small";
      if (mode == PreemptionMode::kSwap) {
        EXPECT_GT(got->stats.swapped_out_blocks, 0);
      }
      EXPECT_EQ(got->tokens, want->tokens) << "mode " << static_cast<int>(mode);
    }
  }
}

}  // namespace
}  // namespace pagellm
