// The sketch of the CUDA backend against the Backend boundary. Each method says what the next
// issue puts there; today each returns Unimplemented.
#include "worker/backend/cuda/cuda_backend.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagellm {
namespace {

constexpr char kNotBuilt[] =
    "the CUDA backend is not built yet (the GPU worker is the next issue); use --device cpu";

class CudaBackendSketch : public Backend {
 public:
  CudaBackendSketch(std::shared_ptr<const ModelCheckpoint> ckpt, const CudaBackendOptions& o)
      : checkpoint_(std::move(ckpt)), options_(o) {}

  const ModelConfig& config() const override { return checkpoint_->config; }
  std::string name() const override { return "cuda"; }
  int64_t block_size() const override { return options_.block_size; }
  int64_t max_batch_tokens() const override { return options_.max_batch_tokens; }
  int64_t num_kv_blocks() const override { return options_.num_kv_blocks; }
  int64_t num_swap_blocks() const override { return 0; }

  // Upload the batch arrays (one pinned staging buffer, one async copy), then: embedding gather
  // -> per layer fused RMSNorm, cuBLAS QKV, RoPE fused with the paged K/V write, paged attention
  // (decode or prefill kernel by batch.all_decode), cuBLAS O, fused residual + RMSNorm, gate/up,
  // SiLU-and-mul, down -> final norm and LM head for the logits rows -> on-device sampling of
  // every SamplingRow; copy back only token ids, logprobs and beam candidates. An all-decode batch
  // replays a captured graph for its padded size.
  absl::Status Forward(const ForwardBatch&, const SamplingBatch&, SamplerOutput*) override {
    return absl::UnimplementedError(kNotBuilt);
  }
  // As Forward, but copies the logits rows to the host instead of sampling.
  absl::Status ForwardLogits(const ForwardBatch&, float*) override {
    return absl::UnimplementedError(kNotBuilt);
  }
  // Copy-on-write: one batched kernel for the step's device copies; swaps: cudaMemcpyAsync
  // between the device pool and the pinned swap pool on the copy stream, ordered before the step.
  absl::Status CopyKv(std::span<const KvCopy>) override {
    return absl::UnimplementedError(kNotBuilt);
  }

 private:
  std::shared_ptr<const ModelCheckpoint> checkpoint_;
  CudaBackendOptions options_;
};

absl::StatusOr<GgmlType> DeviceDtype(const std::string& dtype, GgmlType stored) {
  if (dtype == "bfloat16") return GgmlType::kBF16;
  if (dtype == "float16") return GgmlType::kF16;
  if (dtype == "auto") return stored == GgmlType::kF16 ? GgmlType::kF16 : GgmlType::kBF16;
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype ", dtype, " for --device cuda (auto, bfloat16, float16)"));
}

}  // namespace

absl::StatusOr<CudaUploadPlan> PlanCudaUpload(const ModelCheckpoint& c,
                                              const CudaBackendOptions& o) {
  const ModelConfig& cfg = c.config;
  const int32_t ws = o.shard.world_size;
  if (ws < 1 || cfg.num_heads % ws != 0 || cfg.num_kv_heads % ws != 0 ||
      cfg.intermediate_size % ws != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor parallelism of ", ws, " does not divide ", cfg.num_heads, " heads, ",
        cfg.num_kv_heads, " KV heads and an intermediate size of ", cfg.intermediate_size));
  }
  CudaUploadPlan plan;
  for (const LlamaTensorSpec& spec : LlamaTensorSpecs(cfg)) {
    if (c.tensors.Find(spec.name) == nullptr) continue;  // optional and absent
    ASSIGN_OR_RETURN(TensorView shard, LlamaShard(c, spec.name, o.shard));
    CudaUploadEntry e;
    e.name = spec.name;
    // Norms and biases stay fp32 on the device; matrices and embeddings take the compute type.
    const bool vector = shard.shape.size() == 1;
    ASSIGN_OR_RETURN(e.device_dtype, DeviceDtype(o.dtype, shard.dtype));
    if (vector) e.device_dtype = GgmlType::kF32;
    e.converted = e.device_dtype != shard.dtype;
    e.device_bytes = shard.num_elements() * (e.device_dtype == GgmlType::kF32 ? 4 : 2);
    e.shard = std::move(shard);
    plan.total_device_bytes += e.device_bytes;
    plan.converted_tensors += e.converted;
    plan.tensors.push_back(std::move(e));
  }
  return plan;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(
    std::shared_ptr<const ModelCheckpoint> checkpoint, const CudaBackendOptions& options) {
  if (checkpoint == nullptr) return absl::InvalidArgumentError("--device cuda needs a model");
  if (options.block_size != 8 && options.block_size != 16 && options.block_size != 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("--block-size ", options.block_size, " for --device cuda (8, 16, 32)"));
  }
  if (options.gpu_memory_utilization <= 0.0 || options.gpu_memory_utilization > 1.0) {
    return absl::InvalidArgumentError("--gpu-memory-utilization must be in (0, 1]");
  }
  RETURN_IF_ERROR(PlanCudaUpload(*checkpoint, options).status());
  return absl::UnimplementedError(kNotBuilt);
}

std::unique_ptr<Backend> TEST_NewCudaBackendSketch(std::shared_ptr<const ModelCheckpoint> ckpt,
                                                   const CudaBackendOptions& options) {
  return std::make_unique<CudaBackendSketch>(std::move(ckpt), options);
}

}  // namespace pagellm
