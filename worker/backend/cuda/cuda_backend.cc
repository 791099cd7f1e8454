// The device-independent half of the CUDA backend: the upload plan and option checks. The
// backend itself (cuda_device_backend.cc) is compiled only where nvcc was found.
#include "worker/backend/cuda/cuda_backend.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#ifdef PAGELLM_HAVE_CUDA
#include "worker/backend/cuda/cuda_device_backend.h"
#endif

namespace pagellm {
namespace {

absl::StatusOr<GgmlType> DeviceDtype(const std::string& dtype, GgmlType stored) {
  if (dtype == "bfloat16") return GgmlType::kBF16;
  if (dtype == "float16") return GgmlType::kF16;
  if (dtype == "auto") return stored == GgmlType::kF16 ? GgmlType::kF16 : GgmlType::kBF16;
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype ", dtype, " for --device cuda (auto, bfloat16, float16)"));
}

bool IsVocabTensor(const std::string& name) {
  return name == "model.embed_tokens.weight" || name == "lm_head.weight";
}

// A plan with only its vocabulary split filled in.
CudaUploadPlan VocabPlan(const ModelConfig& c, const ShardSpec& shard) {
  CudaUploadPlan plan;
  plan.vocab_shard = VocabShard(c.vocab_size, shard);
  plan.vocab_begin = VocabBegin(c.vocab_size, plan.vocab_shard);
  plan.vocab_rows = c.vocab_size / plan.vocab_shard.world_size;
  return plan;
}

// Weights the device generates: the shapes of LlamaTensorSpecs, cut for this rank. A shard's
// values are the generator's for its own name and shape, not a slice of the whole tensor's.
absl::StatusOr<CudaUploadPlan> PlanGenerated(const ModelCheckpoint& c,
                                             const CudaBackendOptions& o) {
  CudaUploadPlan plan = VocabPlan(c.config, o.shard);
  ASSIGN_OR_RETURN(plan.device_dtype, DeviceDtype(o.dtype, c.generated->type));
  const int32_t ws = o.shard.world_size;
  for (const LlamaTensorSpec& spec : LlamaTensorSpecs(c.config)) {
    if (spec.optional) continue;  // rope_freqs; lm_head when tied
    CudaUploadEntry e;
    e.name = spec.name;
    e.generated = true;
    e.shard.shape = spec.shape;
    if (spec.shape.size() == 2) e.fan_in = spec.shape[1];
    if (spec.shard == ShardDim::kRows) e.shard.shape[0] /= ws;
    if (spec.shard == ShardDim::kColumns) e.shard.shape[1] /= ws;
    if (IsVocabTensor(spec.name)) e.shard.shape[0] = plan.vocab_rows;
    e.device_dtype = spec.shape.size() == 1 ? GgmlType::kF32 : plan.device_dtype;
    e.shard.dtype = e.device_dtype;
    e.device_bytes = e.shard.num_elements() * (e.device_dtype == GgmlType::kF32 ? 4 : 2);
    plan.total_device_bytes += e.device_bytes;
    plan.tensors.push_back(std::move(e));
  }
  return plan;
}

}  // namespace

absl::StatusOr<CudaUploadPlan> PlanCudaUpload(const ModelCheckpoint& c,
                                              const CudaBackendOptions& o) {
  const ModelConfig& cfg = c.config;
  RETURN_IF_ERROR(RankConfig(cfg, o.shard).status());
  if (c.generated.has_value()) return PlanGenerated(c, o);
  // One compute type for every matrix: the first layer's Q projection decides "auto".
  const TensorView* q0 = c.tensors.Find(LlamaTensorName(0, "self_attn.q_proj.weight"));
  if (q0 == nullptr) return absl::InvalidArgumentError("the checkpoint has no layer 0");
  CudaUploadPlan plan = VocabPlan(cfg, o.shard);
  ASSIGN_OR_RETURN(plan.device_dtype, DeviceDtype(o.dtype, q0->dtype));
  for (const LlamaTensorSpec& spec : LlamaTensorSpecs(cfg)) {
    const TensorView* whole = c.tensors.Find(spec.name);
    if (whole == nullptr) continue;  // optional and absent
    ASSIGN_OR_RETURN(TensorView shard, IsVocabTensor(spec.name)
                                           ? ShardOf(*whole, plan.vocab_shard, ShardDim::kRows)
                                           : LlamaShard(c, spec.name, o.shard));
    CudaUploadEntry e;
    e.name = spec.name;
    // Norms and biases stay fp32 on the device; matrices and embeddings take the compute type.
    const bool vector = shard.shape.size() == 1;
    e.device_dtype = vector ? GgmlType::kF32 : plan.device_dtype;
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
  if (options.max_batch_tokens <= 0 || options.max_num_seqs <= 0 || options.swap_space_bytes < 0 ||
      options.num_kv_blocks < 0) {
    return absl::InvalidArgumentError(
        "--max-num-batched-tokens and --max-num-seqs must be positive, --swap-space and "
        "--num-kv-blocks not negative");
  }
  if (options.communicator != nullptr &&
      (options.communicator->rank() != options.shard.rank ||
       options.communicator->world_size() != options.shard.world_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the communicator is rank ", options.communicator->rank(), " of ",
                     options.communicator->world_size(), ", the shard rank ", options.shard.rank,
                     " of ", options.shard.world_size));
  }
  if (options.communicator == nullptr && options.shard.world_size > 1) {
    return absl::InvalidArgumentError("tensor parallelism on the GPU needs a communicator");
  }
  const int64_t hd = checkpoint->config.head_dim;
  if (hd != 64 && hd != 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "head_dim ", hd, ": the CUDA attention kernels take 64 or 128; use --device cpu"));
  }
  ASSIGN_OR_RETURN(CudaUploadPlan plan, PlanCudaUpload(*checkpoint, options));
#ifdef PAGELLM_HAVE_CUDA
  return cuda::CreateCudaDeviceBackend(std::move(checkpoint), plan, options);
#else
  return absl::UnimplementedError(
      "this build has no CUDA backend (nvcc was not found at build time); use --device cpu");
#endif
}

}  // namespace pagellm
