#include "worker/backend/cpu_backend.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/cpu/f32_matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/kv/kv_cache.h"
#include "worker/model/llama_model.h"

namespace pagellm {
namespace {

class CpuBackend : public Backend {
 public:
  CpuBackend(std::unique_ptr<kernels::ThreadPool> pool, std::unique_ptr<LlamaModel> model,
             std::unique_ptr<KvCache> cache, std::unique_ptr<KvCache> swap, int64_t max_tokens)
      : pool_(std::move(pool)), model_(std::move(model)), cache_(std::move(cache)),
        swap_(std::move(swap)), max_tokens_(max_tokens) {}

  const ModelConfig& config() const override { return model_->config(); }
  std::string name() const override { return "cpu"; }
  int64_t block_size() const override { return cache_->options().block_size; }
  int64_t max_batch_tokens() const override { return max_tokens_; }
  int64_t num_kv_blocks() const override { return cache_->options().num_blocks; }
  int64_t num_swap_blocks() const override {
    return swap_ == nullptr ? 0 : swap_->options().num_blocks;
  }
  absl::Status Forward(const ForwardBatch& batch, float* logits) override {
    return model_->Forward(batch, cache_.get(), logits);
  }
  void CopyKv(std::span<const KvCopy> copies) override {
    for (const KvCopy& c : copies) {
      switch (c.kind) {
        case KvCopy::Kind::kDeviceToDevice:
          KvCache::CopyBlock(*cache_, c.src, cache_.get(), c.dst);
          break;
        case KvCopy::Kind::kDeviceToHost:
          KvCache::CopyBlock(*cache_, c.src, swap_.get(), c.dst);
          break;
        case KvCopy::Kind::kHostToDevice:
          KvCache::CopyBlock(*swap_, c.src, cache_.get(), c.dst);
          break;
      }
    }
  }

 private:
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<KvCache> swap_;  // null without swap space
  int64_t max_tokens_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(std::unique_ptr<LlamaWeights> weights,
                                                          const CpuBackendOptions& o) {
  const ModelConfig c = weights->config;
  if (o.block_size < 1 || o.block_size > 1024)
    return absl::InvalidArgumentError(absl::StrCat("block size ", o.block_size, " not in 1..1024"));
  kernels::KvDtype dtype;
  if (o.kv_cache_dtype == "f32") {
    dtype = kernels::KvDtype::kF32;
  } else if (o.kv_cache_dtype == "f16") {
    dtype = kernels::KvDtype::kF16;
  } else if (o.kv_cache_dtype == "auto") {
    dtype = weights->layers.empty() || weights->layers[0].wq.type == GgmlType::kF32
                ? kernels::KvDtype::kF32
                : kernels::KvDtype::kF16;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown KV cache dtype '", o.kv_cache_dtype, "' (auto, f32, f16)"));
  }
  KvCacheOptions kv;
  kv.num_layers = c.num_layers;
  kv.num_kv_heads = c.num_kv_heads;
  kv.head_dim = c.head_dim;
  kv.block_size = o.block_size;
  kv.dtype = dtype;
  kv.num_blocks = o.num_kv_blocks;
  if (kv.num_blocks <= 0) kv.num_blocks = o.kv_cache_bytes / KvCache::BytesPerBlock(kv);
  if (kv.num_blocks <= 0)
    return absl::InvalidArgumentError("the KV memory budget holds no block");
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  kernels::SetBlasThreads(threads);
  auto pool = std::make_unique<kernels::ThreadPool>(threads);
  if (o.swap_space_bytes < 0) return absl::InvalidArgumentError("swap space must be >= 0");
  ASSIGN_OR_RETURN(auto cache, KvCache::Create(kv));
  std::unique_ptr<KvCache> swap;
  KvCacheOptions swap_options = kv;
  swap_options.num_blocks = o.swap_space_bytes / KvCache::BytesPerBlock(kv);
  if (swap_options.num_blocks > 0) {
    ASSIGN_OR_RETURN(swap, KvCache::Create(swap_options));
  }
  ASSIGN_OR_RETURN(auto model, LlamaModel::Create(std::move(weights), o.max_batch_tokens, pool.get()));
  PLOG_INFO("cpu backend: {} threads, {} KV blocks of {} tokens ({} MiB, {}), {} swap blocks",
            threads, kv.num_blocks, kv.block_size,
            kv.num_blocks * KvCache::BytesPerBlock(kv) >> 20,
            dtype == kernels::KvDtype::kF32 ? "f32" : "f16", swap_options.num_blocks);
  return std::unique_ptr<Backend>(new CpuBackend(std::move(pool), std::move(model),
                                                 std::move(cache), std::move(swap),
                                                 o.max_batch_tokens));
}

}  // namespace pagellm
