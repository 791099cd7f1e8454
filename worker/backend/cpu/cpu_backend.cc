// Forward() = LlamaModel::Forward into a host logits buffer + the reference sampler over it: on
// the CPU the logits are already where the sampler is.
#include "worker/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/cpu/f32_matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/backend/adapter_slots.h"
#include "worker/backend/cpu/host_sampler.h"
#include "worker/backend/cpu/kv_cache.h"
#include "worker/backend/cpu/llama_model.h"

namespace pagellm {
namespace {

class CpuBackend : public Backend {
 public:
  CpuBackend(std::unique_ptr<kernels::ThreadPool> pool, std::unique_ptr<LlamaModel> model,
             std::unique_ptr<KvCache> cache, std::unique_ptr<KvCache> swap,
             const CpuBackendOptions& options)
      : pool_(std::move(pool)),
        model_(std::move(model)),
        cache_(std::move(cache)),
        swap_(std::move(swap)),
        options_(options),
        adapters_(options.lora_adapters, options.max_loras) {}

  const ModelConfig& config() const override { return model_->config(); }
  std::string name() const override { return "cpu"; }
  int64_t block_size() const override { return cache_->options().block_size; }
  int64_t max_batch_tokens() const override { return options_.max_batch_tokens; }
  int64_t num_kv_blocks() const override { return cache_->options().num_blocks; }
  int64_t num_swap_blocks() const override {
    return swap_ == nullptr ? 0 : swap_->options().num_blocks;
  }
  const std::vector<std::string>& adapter_names() const override { return adapters_.names(); }

  bool adapters_can_change() const override { return true; }
  absl::Status SetAdapter(int32_t slot, std::shared_ptr<const LoraAdapter> adapter) override {
    RETURN_IF_ERROR(adapters_.Check(slot, adapter.get()));
    std::unique_ptr<LoraAdapter> slice;
    if (adapter != nullptr) {
      ASSIGN_OR_RETURN(slice, ShardLoraAdapter(*adapter, options_.shard));
    }
    RETURN_IF_ERROR(model_->SetAdapter(slot, std::move(slice)));
    adapters_.Set(slot, adapter.get());
    return absl::OkStatus();
  }

  absl::Status Forward(const ForwardBatch& batch, const SamplingBatch& sampling,
                       SamplerOutput* out) override {
    RETURN_IF_ERROR(ForwardLogits(batch, sampler_.Logits(batch.num_logits)));
    return sampler_.Sample(batch.num_logits, sampling, out);
  }

  absl::Status ForwardLogits(const ForwardBatch& batch, float* logits) override {
    last_logits_rows_ = 0;
    if (options_.validate_batches) {
      RETURN_IF_ERROR(ValidateForwardBatch(batch, limits()));
    }
    RETURN_IF_ERROR(model_->Forward(batch, cache_.get(), logits));
    last_logits_rows_ = batch.num_logits;
    return absl::OkStatus();
  }

  absl::Status FinalHidden(std::span<const int32_t> rows, float* out) override {
    const int64_t hs = config().hidden_size;
    for (int32_t r : rows) {
      if (r < 0 || r >= last_logits_rows_) {
        return absl::InvalidArgumentError(
            absl::StrCat("hidden state of row ", r, ": the last step had ", last_logits_rows_));
      }
      std::copy_n(model_->final_hidden() + r * hs, hs, out);
      out += hs;
    }
    return absl::OkStatus();
  }

  absl::Status ForwardDiscardLogits(const ForwardBatch& batch) override {
    return ForwardLogits(batch, sampler_.Logits(batch.num_logits));
  }

  absl::Status CopyKv(std::span<const KvCopy> copies) override {
    for (const KvCopy& c : copies) {
      const KvCache* from = c.kind == KvCopy::Kind::kSwapToDevice ? swap_.get() : cache_.get();
      KvCache* to = c.kind == KvCopy::Kind::kDeviceToSwap ? swap_.get() : cache_.get();
      if (from == nullptr || to == nullptr || c.src < 0 || c.src >= from->options().num_blocks ||
          c.dst < 0 || c.dst >= to->options().num_blocks) {
        return absl::InvalidArgumentError(
            absl::StrCat("KV copy ", c.src, " -> ", c.dst, " outside the pools (", num_kv_blocks(),
                         " device, ", num_swap_blocks(), " swap blocks)"));
      }
      KvCache::CopyBlock(*from, c.src, to, c.dst);
    }
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<KvCache> swap_;  // null without swap space
  const CpuBackendOptions options_;
  AdapterSlots adapters_;
  int64_t last_logits_rows_ = 0;  // of the last successful step: rows FinalHidden may read
  HostSampler sampler_{model_->config().vocab_size};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    std::shared_ptr<const ModelCheckpoint> checkpoint, const CpuBackendOptions& o) {
  if (o.block_size < 1 || o.block_size > 1024)
    return absl::InvalidArgumentError(absl::StrCat("block size ", o.block_size, " not in 1..1024"));
  if (o.swap_space_bytes < 0) return absl::InvalidArgumentError("swap space must be >= 0");
  static constexpr const char* kKvDtypes[] = {"auto", "f32", "f16", "fp8", "fp8_e4m3", "fp8_e5m2"};
  if (std::find(std::begin(kKvDtypes), std::end(kKvDtypes), o.kv_cache_dtype) ==
      std::end(kKvDtypes)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown KV cache dtype '", o.kv_cache_dtype,
                                                   "' (auto, f32, f16, fp8, fp8_e4m3, fp8_e5m2)"));
  }
  if (o.dtype != "auto" && o.dtype != "float32" && o.dtype != "bfloat16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype ", o.dtype, ": the CPU backend takes auto, float32 or bfloat16"));
  }
  LlamaPackOptions pack;
  pack.bf16_matrices = o.dtype == "bfloat16";
  pack.shard = o.shard;
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaWeights> weights,
                   PackLlamaWeights(std::move(checkpoint), pack));
  const ModelConfig c = weights->rank_config;
  const int64_t weight_bytes = weights->HostBytes();
  kernels::KvDtype dtype = kernels::KvDtype::kF16;
  if (o.kv_cache_dtype == "f32" ||
      (o.kv_cache_dtype == "auto" &&
       (weights->layers.empty() || weights->layers[0].wq.type == GgmlType::kF32))) {
    dtype = kernels::KvDtype::kF32;
  }
  // As vLLM: "fp8" is E4M3; the values are stored unscaled (vLLM's default scale of 1.0).
  if (o.kv_cache_dtype == "fp8" || o.kv_cache_dtype == "fp8_e4m3") {
    dtype = kernels::KvDtype::kFp8E4M3;
  } else if (o.kv_cache_dtype == "fp8_e5m2") {
    dtype = kernels::KvDtype::kFp8E5M2;
  }
  KvCacheOptions kv;
  kv.num_layers = c.num_layers;
  kv.num_kv_heads = c.num_kv_heads;
  kv.head_dim = c.head_dim;
  kv.block_size = o.block_size;
  kv.dtype = dtype;
  kv.num_blocks = o.num_kv_blocks;
  if (kv.num_blocks <= 0) kv.num_blocks = o.kv_cache_bytes / KvCache::BytesPerBlock(kv);
  if (kv.num_blocks <= 0) return absl::InvalidArgumentError("the KV memory budget holds no block");
  const int threads =
      o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  kernels::UseSingleThreadedBlas();
  auto pool = std::make_unique<kernels::ThreadPool>(threads);
  ASSIGN_OR_RETURN(auto cache, KvCache::Create(kv));
  std::unique_ptr<KvCache> swap;
  KvCacheOptions swap_options = kv;
  swap_options.num_blocks = o.swap_space_bytes / KvCache::BytesPerBlock(kv);
  if (swap_options.num_blocks > 0) {
    ASSIGN_OR_RETURN(swap, KvCache::Create(swap_options));
  }
  std::vector<std::unique_ptr<const LoraAdapter>> adapters;
  int64_t adapter_bytes = 0;
  for (const auto& adapter : o.lora_adapters) {
    ASSIGN_OR_RETURN(std::unique_ptr<LoraAdapter> slice, ShardLoraAdapter(*adapter, o.shard));
    adapter_bytes += slice->HostBytes();
    adapters.push_back(std::move(slice));
  }
  adapters.resize(std::max<size_t>(adapters.size(), o.max_loras));  // empty slots: null
  ASSIGN_OR_RETURN(auto model, LlamaModel::Create(std::move(weights), o.max_batch_tokens,
                                                  pool.get(), o.communicator, std::move(adapters)));
  if (!o.lora_adapters.empty()) {
    PLOG_INFO("cpu backend: {} LoRA adapters, {} KiB", o.lora_adapters.size(), adapter_bytes >> 10);
  }
  PLOG_INFO(
      "cpu backend: {} threads, weights {} MiB, {} KV blocks of {} tokens ({} MiB, {}), {} swap "
      "blocks",
      threads, weight_bytes >> 20, kv.num_blocks, kv.block_size,
      kv.num_blocks * KvCache::BytesPerBlock(kv) >> 20,
      dtype == kernels::KvDtype::kF32       ? "f32"
      : dtype == kernels::KvDtype::kFp8E4M3 ? "fp8_e4m3"
      : dtype == kernels::KvDtype::kFp8E5M2 ? "fp8_e5m2"
                                            : "f16",
      swap_options.num_blocks);
  return std::unique_ptr<Backend>(
      new CpuBackend(std::move(pool), std::move(model), std::move(cache), std::move(swap), o));
}

}  // namespace pagellm
