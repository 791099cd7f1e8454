// The CUDA backend's host half: the upload plan and the option checks, which run without a GPU.
#include "worker/backend/cuda/cuda_backend.h"

#include <string>

#ifdef PAGELLM_HAVE_CUDA
#include <cuda_runtime.h>
#endif

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

TEST(CudaBackendTest, PlansBf16WeightsAsTheyAreAndConvertsTheRest) {
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

TEST(CudaBackendTest, TensorParallelismHalvesTheShardedWeights) {
  const auto ckpt = Tiny(GgmlType::kBF16);
  CudaBackendOptions o;
  o.shard = {.rank = 1, .world_size = 2};
  absl::StatusOr<CudaUploadPlan> half = PlanCudaUpload(*ckpt, o);
  ASSERT_TRUE(half.ok()) << half.status();
  // The layers' matrices and the (tied) embedding: 2 divides the 64-token vocabulary, so rank 1
  // holds its rows 32..63.
  const int64_t sharded = 2 * (32 * 32 + 2 * 16 * 32 + 32 * 32 + 3 * 64 * 32) / 2;
  EXPECT_EQ(half->total_device_bytes, 2 * (32 * 32 + sharded) + 4 * 32 * 5);
  EXPECT_EQ(half->vocab_begin, 32);
  EXPECT_EQ(half->vocab_rows, 32);
  const TensorView* embd = ckpt->tensors.Find("model.embed_tokens.weight");
  ASSERT_NE(embd, nullptr);
  for (const CudaUploadEntry& e : half->tensors) {
    if (e.name != "model.embed_tokens.weight") continue;
    EXPECT_EQ(e.shard.shape, (std::vector<int64_t>{32, 32}));
    EXPECT_EQ(e.shard.data, embd->row(32));
  }
  // O is row-parallel: rank 1 holds input columns 16..31 of every row.
  const TensorView* o0 = ckpt->tensors.Find("model.layers.0.self_attn.o_proj.weight");
  ASSERT_NE(o0, nullptr);
  for (const CudaUploadEntry& e : half->tensors) {
    if (e.name != "model.layers.0.self_attn.o_proj.weight") continue;
    EXPECT_EQ(e.shard.shape, (std::vector<int64_t>{32, 16}));
    EXPECT_EQ(e.shard.data, o0->data + 16 * 2);
    EXPECT_EQ(e.shard.row_stride_bytes, 32 * 2);
  }
  o.shard = {.rank = 0, .world_size = 4};  // 2 KV heads do not split four ways
  EXPECT_EQ(PlanCudaUpload(*ckpt, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaBackendTest, AVocabularyTheWorldSizeDoesNotDivideStaysWhole) {
  ModelConfig c = testing::TinyLlamaConfig();
  c.vocab_size = 65;
  const auto ckpt = testing::TinyCheckpoint(GgmlType::kBF16, c, 5);
  ASSERT_NE(ckpt, nullptr);
  CudaBackendOptions o;
  o.shard = {.rank = 1, .world_size = 2};
  absl::StatusOr<CudaUploadPlan> plan = PlanCudaUpload(*ckpt, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->vocab_shard.world_size, 1);
  EXPECT_EQ(plan->vocab_begin, 0);
  EXPECT_EQ(plan->vocab_rows, 65);
}

TEST(CudaBackendTest, GeneratedShardsKeepTheWholeTensorsScaleAndVocabularySplit) {
  ModelConfig c = testing::TinyLlamaConfig();
  auto ckpt = MakeGeneratedCheckpoint(c, GgmlType::kBF16, 3);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  CudaBackendOptions o;
  o.shard = {.rank = 1, .world_size = 2};
  absl::StatusOr<CudaUploadPlan> plan = PlanCudaUpload(**ckpt, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const CudaUploadEntry& e : plan->tensors) {
    if (e.name == "model.embed_tokens.weight") {
      EXPECT_EQ(e.shard.shape, (std::vector<int64_t>{32, 32}));
    }
    if (e.name == "model.layers.0.mlp.down_proj.weight") {
      EXPECT_EQ(e.shard.shape, (std::vector<int64_t>{32, 32}));
      EXPECT_EQ(e.fan_in, 64);
    }
  }
}

TEST(CudaBackendTest, OneComputeTypeForEveryMatrix) {
  const auto bf16 = Tiny(GgmlType::kBF16);
  CudaBackendOptions o;
  o.dtype = "float16";
  absl::StatusOr<CudaUploadPlan> plan = PlanCudaUpload(*bf16, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->device_dtype, GgmlType::kF16);
  for (const CudaUploadEntry& e : plan->tensors) {
    EXPECT_EQ(e.device_dtype, e.shard.shape.size() == 1 ? GgmlType::kF32 : GgmlType::kF16)
        << e.name;
  }
  EXPECT_EQ(PlanCudaUpload(*Tiny(GgmlType::kF16), {})->device_dtype, GgmlType::kF16);
  EXPECT_EQ(PlanCudaUpload(*Tiny(GgmlType::kQ4_1), {})->device_dtype, GgmlType::kBF16);
}

TEST(CudaBackendTest, PlansGeneratedWeightsWithTheShapesOfTheirFiles) {
  const ModelConfig c = testing::TinyLlamaConfig(2, /*attention_bias=*/true, /*tied=*/false);
  absl::StatusOr<std::unique_ptr<ModelCheckpoint>> gen =
      MakeGeneratedCheckpoint(c, GgmlType::kBF16, 3);
  ASSERT_TRUE(gen.ok()) << gen.status();
  EXPECT_EQ((*gen)->tensors.size(), 0u);
  const auto stored = testing::TinyCheckpoint(GgmlType::kBF16, c);
  absl::StatusOr<CudaUploadPlan> want = PlanCudaUpload(*stored, {});
  absl::StatusOr<CudaUploadPlan> got = PlanCudaUpload(**gen, {});
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->total_device_bytes, want->total_device_bytes);
  ASSERT_EQ(got->tensors.size(), want->tensors.size());
  for (size_t i = 0; i < got->tensors.size(); ++i) {
    EXPECT_EQ(got->tensors[i].name, want->tensors[i].name);
    EXPECT_EQ(got->tensors[i].shard.shape, want->tensors[i].shard.shape);
    EXPECT_TRUE(got->tensors[i].generated);
    EXPECT_EQ(got->tensors[i].shard.data, nullptr);
  }
  CudaBackendOptions half;
  half.shard = {.rank = 0, .world_size = 2};
  EXPECT_EQ(PlanCudaUpload(**gen, half)->total_device_bytes,
            PlanCudaUpload(*stored, half)->total_device_bytes);
  EXPECT_FALSE(MakeGeneratedCheckpoint(c, GgmlType::kQ4_1, 3).ok());
}

TEST(CudaBackendTest, CreateValidatesTheOptionsFirst) {
  const auto ckpt = Tiny(GgmlType::kBF16);
  CudaBackendOptions o;
  o.dtype = "float64";
  EXPECT_EQ(CreateCudaBackend(ckpt, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.block_size = 12;
  EXPECT_EQ(CreateCudaBackend(ckpt, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.gpu_memory_utilization = 1.5;
  EXPECT_EQ(CreateCudaBackend(ckpt, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.max_num_seqs = 0;
  EXPECT_EQ(CreateCudaBackend(ckpt, o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCudaBackend(nullptr, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaBackendTest, RefusesHeadDimsTheKernelsDoNotTake) {
  const absl::Status s = CreateCudaBackend(Tiny(GgmlType::kBF16), {}).status();  // head_dim 8
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("head_dim 8"));
}

TEST(CudaBackendTest, WithoutAGpuCreateSaysSo) {
  int devices = 0;
#ifdef PAGELLM_HAVE_CUDA
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) GTEST_SKIP() << "a GPU is here";
#endif
  ModelConfig c = testing::TinyLlamaConfig();
  c.num_heads = 1;
  c.num_kv_heads = 1;
  c.head_dim = 64;
  const absl::Status s =
      CreateCudaBackend(testing::TinyCheckpoint(GgmlType::kBF16, c), {}).status();
#ifdef PAGELLM_HAVE_CUDA
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("no CUDA device found"));
#else
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--device cpu"));
#endif
  (void)devices;
}

}  // namespace
}  // namespace pagellm
