// KvCache: the storage of a paged KV pool (the device pool or the swap pool of the CPU backend)
// in host memory, one K and one V buffer per layer in the layout of kernels/paged_kv.h. Block ids
// are handed out by the BlockManager; this class only holds the bytes. Memory is mapped lazily
// (zero pages until first written), so an unused swap pool costs nothing.
//
// Not thread-safe: the engine thread owns it; kernels write into it during a forward step.
#ifndef PAGELLM_WORKER_BACKEND_CPU_KV_CACHE_H_
#define PAGELLM_WORKER_BACKEND_CPU_KV_CACHE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/paged_kv.h"

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

  // Bytes one block takes over all layers, K and V.
  static int64_t BytesPerBlock(const KvCacheOptions& options);

  // Copies block `src` of `from` to block `dst` of `to` in every layer (copy-on-write when both
  // are the same pool, swapping otherwise). REQUIRES: both pools have the same shape and dtype
  // (the number of blocks may differ) and the ids are in range.
  static void CopyBlock(const KvCache& from, int32_t src, KvCache* to, int32_t dst);

 private:
  explicit KvCache(const KvCacheOptions& options);
  KvCacheOptions options_;
  int64_t layer_bytes_ = 0;
  struct FreeDeleter {
    void operator()(char* p) const;
  };
  std::vector<std::unique_ptr<char, FreeDeleter>> k_, v_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_CPU_KV_CACHE_H_
