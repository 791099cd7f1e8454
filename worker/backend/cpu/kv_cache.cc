#include "worker/backend/cpu/kv_cache.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace pagellm {

int64_t KvCache::BytesPerBlock(const KvCacheOptions& o) {
  return 2 * o.num_layers * o.num_kv_heads * o.block_size * o.head_dim *
         kernels::KvDtypeBytes(o.dtype);
}

void KvCache::FreeDeleter::operator()(char* p) const { std::free(p); }

KvCache::KvCache(const KvCacheOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheOptions& o) {
  if (o.num_layers <= 0 || o.num_kv_heads <= 0 || o.head_dim <= 0 || o.block_size <= 0 ||
      o.block_size > 1024 || o.num_blocks <= 0 || o.num_blocks > (1 << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad KV cache shape: ", o.num_blocks, " blocks of ", o.block_size, " tokens"));
  }
  std::unique_ptr<KvCache> cache(new KvCache(o));
  cache->layer_bytes_ =
      o.num_blocks * o.num_kv_heads * o.block_size * o.head_dim * kernels::KvDtypeBytes(o.dtype);
  for (int64_t l = 0; l < o.num_layers; ++l) {
    // calloc: zero pages mapped on first touch, so no uninitialised memory is ever read and an
    // unused swap pool costs no resident memory.
    char* k = static_cast<char*>(std::calloc(cache->layer_bytes_, 1));
    char* v = static_cast<char*>(std::calloc(cache->layer_bytes_, 1));
    if (k == nullptr || v == nullptr) {
      std::free(k);
      std::free(v);
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate the KV pool: ", o.num_blocks, " blocks"));
    }
    cache->k_.emplace_back(k);
    cache->v_.emplace_back(v);
  }
  return cache;
}

kernels::PagedKvLayer KvCache::layer(int64_t i) const {
  return {k_[i].get(),         v_[i].get(),           options_.dtype,
          options_.block_size, options_.num_kv_heads, options_.head_dim};
}

void KvCache::CopyBlock(const KvCache& from, int32_t src, KvCache* to, int32_t dst) {
  const KvCacheOptions& a = from.options_;
  const KvCacheOptions& b = to->options_;
  PAGELLM_CHECK(a.num_layers == b.num_layers && a.num_kv_heads == b.num_kv_heads &&
                    a.head_dim == b.head_dim && a.block_size == b.block_size && a.dtype == b.dtype,
                "KV block copy between pools of different shapes");
  PAGELLM_CHECK(src >= 0 && src < a.num_blocks && dst >= 0 && dst < b.num_blocks,
                "KV block copy {} -> {} out of range ({} / {} blocks)", src, dst, a.num_blocks,
                b.num_blocks);
  const int64_t block_bytes = from.layer_bytes_ / a.num_blocks;
  for (size_t l = 0; l < from.k_.size(); ++l) {
    std::memmove(to->k_[l].get() + dst * block_bytes, from.k_[l].get() + src * block_bytes,
                 block_bytes);
    std::memmove(to->v_[l].get() + dst * block_bytes, from.v_[l].get() + src * block_bytes,
                 block_bytes);
  }
}

}  // namespace pagellm
