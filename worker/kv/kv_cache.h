// KvCache: the storage of a paged KV pool on the CPU, one K and one V buffer per layer with the
// layout of kernels/cpu/paged_attention.h, plus the allocator of its blocks.
//
// Not thread-safe: the engine thread owns it; kernels write into it during a forward step.
#ifndef PAGELLM_WORKER_KV_KV_CACHE_H_
#define PAGELLM_WORKER_KV_KV_CACHE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/paged_attention.h"
#include "worker/kv/block_allocator.h"

namespace pagellm {

struct KvCacheOptions {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  int64_t num_blocks = 0;  // > 0
  kernels::KvDtype dtype = kernels::KvDtype::kF16;
};

class KvCache {
 public:
  // InvalidArgument for non-positive sizes; ResourceExhausted if the pool cannot be allocated.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(const KvCacheOptions& options);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheOptions& options() const { return options_; }
  kernels::PagedKvLayer layer(int64_t i) const;
  BlockAllocator& allocator() { return allocator_; }
  const BlockAllocator& allocator() const { return allocator_; }

  // Bytes one block takes over all layers, K and V.
  static int64_t BytesPerBlock(const KvCacheOptions& options);

  // Copies block `src` to block `dst` in every layer (copy-on-write support).
  void CopyBlock(int32_t src, int32_t dst);

 private:
  explicit KvCache(const KvCacheOptions& options);
  KvCacheOptions options_;
  int64_t layer_bytes_ = 0;
  std::vector<std::unique_ptr<char[]>> k_, v_;
  BlockAllocator allocator_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_KV_KV_CACHE_H_
