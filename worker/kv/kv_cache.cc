#include "worker/kv/kv_cache.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace pagellm {

int64_t KvCache::BytesPerBlock(const KvCacheOptions& o) {
  return 2 * o.num_layers * o.num_kv_heads * o.block_size * o.head_dim * kernels::KvDtypeBytes(o.dtype);
}

KvCache::KvCache(const KvCacheOptions& options)
    : options_(options), allocator_(static_cast<int32_t>(options.num_blocks)) {}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheOptions& o) {
  if (o.num_layers <= 0 || o.num_kv_heads <= 0 || o.head_dim <= 0 || o.block_size <= 0 ||
      o.block_size > 1024 || o.num_blocks <= 0 || o.num_blocks > (1 << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("bad KV cache shape: ", o.num_blocks,
                                                   " blocks of ", o.block_size, " tokens"));
  }
  std::unique_ptr<KvCache> cache(new KvCache(o));
  cache->layer_bytes_ = o.num_blocks * o.num_kv_heads * o.block_size * o.head_dim *
                        kernels::KvDtypeBytes(o.dtype);
  for (int64_t l = 0; l < o.num_layers; ++l) {
    // Zero-initialised so that no uninitialised memory is ever read (pages are touched lazily).
    char* k = new (std::nothrow) char[cache->layer_bytes_]();
    char* v = new (std::nothrow) char[cache->layer_bytes_]();
    if (k == nullptr || v == nullptr) {
      delete[] k;
      delete[] v;
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate the KV pool: ", o.num_blocks, " blocks"));
    }
    cache->k_.emplace_back(k);
    cache->v_.emplace_back(v);
  }
  return cache;
}

kernels::PagedKvLayer KvCache::layer(int64_t i) const {
  return {k_[i].get(), v_[i].get(), options_.dtype, options_.block_size, options_.num_kv_heads,
          options_.head_dim};
}

void KvCache::CopyBlock(int32_t src, int32_t dst) {
  const int64_t block_bytes = layer_bytes_ / options_.num_blocks;
  for (size_t l = 0; l < k_.size(); ++l) {
    std::memcpy(k_[l].get() + dst * block_bytes, k_[l].get() + src * block_bytes, block_bytes);
    std::memcpy(v_[l].get() + dst * block_bytes, v_[l].get() + src * block_bytes, block_bytes);
  }
}

}  // namespace pagellm
