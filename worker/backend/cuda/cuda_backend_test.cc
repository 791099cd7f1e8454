// The CUDA backend sketch: the upload plan is real (checked here), serving is refused.
#include "worker/backend/cuda/cuda_backend.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/model/testing/tiny_model.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const ModelCheckpoint> Tiny(GgmlType type) {
  auto ckpt = testing::TinyCheckpoint(type, testing::TinyLlamaConfig(), 5);
  EXPECT_NE(ckpt, nullptr);
  return ckpt;
}

TEST(CudaBackendSketchTest, PlansBf16WeightsAsTheyAreAndConvertsTheRest) {
  const auto bf16 = Tiny(GgmlType::kBF16);
  absl::StatusOr<CudaUploadPlan> plan = PlanCudaUpload(*bf16, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Embedding 64x32 and per layer q 32x32, k/v 16x32, o 32x32, gate/up 64x32, down 32x64: bf16;
  // norms (32 each, five of them) stay fp32.
  const int64_t matrix_elems = 64 * 32 + 2 * (32 * 32 + 2 * 16 * 32 + 32 * 32 + 3 * 64 * 32);
  EXPECT_EQ(plan->total_device_bytes, 2 * matrix_elems + 4 * 32 * 5);
  EXPECT_EQ(plan->converted_tensors, 0);

  const auto q8 = Tiny(GgmlType::kQ8_0);
  plan = PlanCudaUpload(*q8, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->converted_tensors, 1 + 2 * 7);  // every matrix is dequantized to bf16
}

TEST(CudaBackendSketchTest, TensorParallelismHalvesTheShardedWeights) {
  const auto ckpt = Tiny(GgmlType::kBF16);
  CudaBackendOptions o;
  o.shard = {.rank = 1, .world_size = 2};
  absl::StatusOr<CudaUploadPlan> half = PlanCudaUpload(*ckpt, o);
  ASSERT_TRUE(half.ok()) << half.status();
  const int64_t sharded = 2 * (32 * 32 + 2 * 16 * 32 + 32 * 32 + 3 * 64 * 32) / 2;
  EXPECT_EQ(half->total_device_bytes, 2 * (64 * 32 + sharded) + 4 * 32 * 5);
  o.shard = {.rank = 0, .world_size = 4};  // 2 KV heads do not split four ways
  EXPECT_EQ(PlanCudaUpload(*ckpt, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaBackendSketchTest, CreateValidatesThenRefusesClearly) {
  const auto ckpt = Tiny(GgmlType::kBF16);
  CudaBackendOptions o;
  o.dtype = "float64";
  EXPECT_EQ(CreateCudaBackend(ckpt, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.block_size = 12;
  EXPECT_EQ(CreateCudaBackend(ckpt, o).status().code(), absl::StatusCode::kInvalidArgument);
  const absl::Status refused = CreateCudaBackend(ckpt, {}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("--device cpu"));
}

TEST(CudaBackendSketchTest, TheSketchImplementsTheBoundaryAndRunsNothing) {
  const auto ckpt = Tiny(GgmlType::kBF16);
  std::unique_ptr<Backend> b = TEST_NewCudaBackendSketch(ckpt, {});
  EXPECT_EQ(b->name(), "cuda");
  EXPECT_EQ(b->config().vocab_size, 64);
  SamplerOutput out;
  EXPECT_EQ(b->Forward(ForwardBatch(), SamplingBatch(), &out).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(b->CopyKv({}).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace pagellm
