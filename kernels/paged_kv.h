// The paged KV cache layout that every kernel family (kernels/cpu, kernels/cuda) reads and
// writes, as plain data with no dependency on either (cf. FlashInfer's paged_kv_t).
//
// One layer's cache is two arrays, K and V, each of shape
//   [num_blocks][num_kv_heads][block_size][head_dim]
// in `dtype`. A slot is block * block_size + offset: token position p of a sequence lives in
// slot block_table[p / block_size] * block_size + p % block_size, and its head h starts at
// element (block * num_kv_heads + h) * block_size * head_dim + offset * head_dim.
//
// Which block holds what is decided by the block manager (worker/kv); the backend owns the
// memory. Plain data; thread-compatible. Safe to include from CUDA sources.
#ifndef PAGELLM_KERNELS_PAGED_KV_H_
#define PAGELLM_KERNELS_PAGED_KV_H_

#include <cstdint>

namespace pagellm::kernels {

// Element type of the cached keys and values. (bf16 joins when the CUDA kernels need it.)
enum class KvDtype : int32_t { kF32, kF16 };

constexpr int64_t KvDtypeBytes(KvDtype t) { return t == KvDtype::kF32 ? 4 : 2; }

// The shape of one layer's pool, without its memory.
struct PagedKvShape {
  KvDtype dtype = KvDtype::kF16;
  int64_t block_size = 16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;

  // Elements one block holds in one of K or V.
  [[nodiscard]] constexpr int64_t block_elems() const {
    return num_kv_heads * block_size * head_dim;
  }
  [[nodiscard]] constexpr int64_t block_bytes() const {
    return block_elems() * KvDtypeBytes(dtype);
  }
  // Element offset of (slot, head) in K or V: the start of head_dim contiguous values.
  [[nodiscard]] constexpr int64_t offset(int64_t slot, int64_t head) const {
    return ((slot / block_size) * num_kv_heads + head) * block_size * head_dim +
           (slot % block_size) * head_dim;
  }
};

// One layer of the pool: where K and V are (host or device memory, as the backend decides).
struct PagedKvLayer {
  void* k = nullptr;
  void* v = nullptr;
  KvDtype dtype = KvDtype::kF16;
  int64_t block_size = 16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;

  [[nodiscard]] constexpr PagedKvShape shape() const {
    return {dtype, block_size, num_kv_heads, head_dim};
  }
};

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_PAGED_KV_H_
