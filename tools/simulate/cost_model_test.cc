#include "tools/simulate/cost_model.h"

#include "gtest/gtest.h"
#include "tools/simulate/hardware.h"
#include "tools/simulate/kv_pool.h"

namespace pagellm::sim {
namespace {

// Small enough to compute by hand: 2 layers, hidden 8 (2 heads of 4), MLP 32, vocab 10.
ModelShape Tiny() {
  return {.name = "tiny",
          .num_layers = 2,
          .hidden = 8,
          .num_heads = 2,
          .num_kv_heads = 2,
          .ffn = 32,
          .gated_ffn = false,
          .vocab = 10,
          .max_len = 64,
          .tied_embeddings = true,
          .learned_positions = true};
}

GpuSpec RoundGpu(double flops) {
  return {.name = "round",
          .peak_flops = flops,
          .hbm_bandwidth = 1e5,
          .memory_bytes = 1e9,
          .pcie_bandwidth = 1e4};
}

CostModelOptions Overhead1ms() {
  CostModelOptions o;
  o.step_overhead_s = 0.001;
  return o;
}

TEST(ModelShapeTest, TinyParameterCountsByHand) {
  const ModelShape m = Tiny();
  // Per layer: q, o 8x8 each; k, v 8x8 each; fc1, fc2 8x32 each = 128 + 128 + 512.
  EXPECT_EQ(m.NonEmbeddingParams(), 2 * 768);
  // + tied embedding 10x8 + positions 64x8.
  EXPECT_EQ(m.TotalParams(), 1536 + 80 + 512);
  // K and V, 2 layers, 8 values each, fp16.
  EXPECT_EQ(m.KvBytesPerToken(), 64);
}

TEST(ModelShapeTest, PaperModelsHaveTheirPublishedSizes) {
  const ModelShape opt = *LookupModel("opt-13b");
  EXPECT_NEAR(static_cast<double>(opt.TotalParams()), 12.85e9, 0.05e9);
  EXPECT_EQ(opt.KvBytesPerToken(), 800 * 1024);  // 2 x 40 x 5120 x 2 bytes
  const ModelShape llama3 = *LookupModel("Llama-3-8B");
  EXPECT_NEAR(static_cast<double>(llama3.TotalParams()), 8.03e9, 0.05e9);
  EXPECT_EQ(llama3.KvBytesPerToken(), 128 * 1024);  // GQA: 8 KV heads of 128
  const ModelShape llama2 = *LookupModel("Llama-2-13B");
  EXPECT_NEAR(static_cast<double>(llama2.TotalParams()), 13.0e9, 0.05e9);
  EXPECT_FALSE(LookupModel("GPT-5").ok());
  EXPECT_FALSE(LookupGpu("TPU").ok());
}

TEST(CostModelTest, MemoryBoundStepByHand) {
  const CostModel model(Tiny(), RoundGpu(1e6), Overhead1ms());
  EXPECT_EQ(model.weight_bytes(), (1536 + 80) * 2);
  StepCost c;
  model.AddSequence(&c, /*num_tokens=*/1, /*context_before=*/3, /*sample=*/true);  // decode
  model.AddSequence(&c, /*num_tokens=*/4, /*context_before=*/0, /*sample=*/true);  // prefill
  // Decode: 2x1536 + 4x2x8x(3 + 1) + 2x10x8 = 3072 + 256 + 160.
  // Prefill: 2x1536x4 + 64x(0 + 1+2+3+4) + 160 = 12288 + 640 + 160.
  EXPECT_DOUBLE_EQ(c.flops, 3488 + 13088);
  // KV read (context + tokens) and written (tokens), 64 bytes each: (4 + 1) x 64 + (4 + 4) x 64.
  EXPECT_DOUBLE_EQ(c.hbm_bytes, 320 + 512);
  EXPECT_EQ(c.tokens, 5);
  // max(16576 / 1e6, (3232 + 832) / 1e5) + 1 ms.
  EXPECT_DOUBLE_EQ(model.Seconds(c), 0.04064 + 0.001);
  // Two swapped blocks of 4 tokens: 2 x 4 x 64 bytes over 1e4 B/s, on top.
  model.AddCopies(&c, /*pcie_blocks=*/2, /*device_blocks=*/0, /*block_size=*/4);
  EXPECT_DOUBLE_EQ(model.Seconds(c), 0.04064 + 0.001 + 0.0512);
}

TEST(CostModelTest, ComputeBoundStepByHand) {
  const CostModel model(Tiny(), RoundGpu(1e5), Overhead1ms());
  StepCost c;
  model.AddSequence(&c, 1, 3, true);
  model.AddSequence(&c, 4, 0, true);
  EXPECT_DOUBLE_EQ(model.Seconds(c), 0.16576 + 0.001);
}

TEST(CostModelTest, EmptyStepCostsOnlyItsCopies) {
  const CostModel model(Tiny(), RoundGpu(1e6), Overhead1ms());
  StepCost c;
  EXPECT_EQ(model.Seconds(c), 0);
  model.AddCopies(&c, 0, /*device_blocks=*/1, /*block_size=*/4);  // read + write 256 bytes
  EXPECT_DOUBLE_EQ(model.Seconds(c), 512 / 1e5);
}

TEST(CostModelTest, TensorParallelismDividesTheRoofline) {
  CostModelOptions two = Overhead1ms();
  two.num_gpus = 2;
  const CostModel one_gpu(Tiny(), RoundGpu(1e6), Overhead1ms());
  const CostModel two_gpus(Tiny(), RoundGpu(1e6), two);
  StepCost c;
  one_gpu.AddSequence(&c, 8, 8, true);
  EXPECT_DOUBLE_EQ(two_gpus.Seconds(c) - 0.001, (one_gpu.Seconds(c) - 0.001) / 2);
}

TEST(KvPoolTest, Opt13bOnA100LeavesAboutTwelveGigabytes) {
  const auto plan = PlanKvPool(*LookupModel("OPT-13B"), *LookupGpu("A100-40GB"), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_NEAR(plan->weight_bytes, 25.7e9, 0.1e9);
  EXPECT_NEAR(plan->pool_bytes, 12.0e9, 0.3e9);
  const int64_t tokens = int64_t{plan->num_device_blocks} * 16;
  EXPECT_GT(tokens, 14000);
  EXPECT_LT(tokens, 15500);
  // 4 GiB of swap in 16 x 800 KiB blocks.
  EXPECT_EQ(plan->num_swap_blocks, 327);
}

TEST(KvPoolTest, OverrideAndTooSmallGpu) {
  KvPoolOptions o;
  o.num_kv_blocks = 100;
  EXPECT_EQ(PlanKvPool(*LookupModel("OPT-13B"), *LookupGpu("A100-40GB"), o)->num_device_blocks,
            100);
  const auto too_big = PlanKvPool(*LookupModel("OPT-66B"), *LookupGpu("A100-40GB"), {});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  KvPoolOptions four;
  four.num_gpus = 4;
  EXPECT_TRUE(PlanKvPool(*LookupModel("OPT-66B"), *LookupGpu("A100-40GB"), four).ok());
  KvPoolOptions bad;
  bad.gpu_memory_utilization = 1.5;
  EXPECT_EQ(PlanKvPool(*LookupModel("OPT-13B"), *LookupGpu("A100-40GB"), bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagellm::sim
