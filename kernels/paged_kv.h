// The paged KV cache layout that every kernel family (kernels/cpu, kernels/cuda) reads and
// writes, as plain data with no dependency on either (cf. FlashInfer's paged_kv_t).
//
// One layer's cache is two arrays, K and V, each holding per block
//   [num_kv_heads][block_size][head_dim]
// in `dtype`, with consecutive blocks block_stride elements apart (block_elems() when the layer
// is dense; more when a pool interleaves the layers of one block, so that a block of every layer
// is one contiguous range -- the CUDA backend's layout, which makes a swap one copy). A slot is
// block * block_size + offset: token position p of a sequence lives in slot
// block_table[p / block_size] * block_size + p % block_size, and its head h starts at element
// block * block_stride + (h * block_size + offset) * head_dim.
//
// Which block holds what is decided by the block manager (worker/kv); the backend owns the
// memory. Plain data; thread-compatible. Safe to include from CUDA sources.
#ifndef PAGELLM_KERNELS_PAGED_KV_H_
#define PAGELLM_KERNELS_PAGED_KV_H_

#include <cstdint>

// The layout's arithmetic runs in host code and in CUDA kernels alike.
#ifdef __CUDACC__
#define PAGELLM_HOST_DEVICE __host__ __device__
#else
#define PAGELLM_HOST_DEVICE
#endif

namespace pagellm::kernels {

// Element type of the cached keys and values.
// The CUDA kernels use it for activations and weights too (kF16 or kBF16). The 8-bit floats
// (common/fp8.h; vLLM's fp8_e4m3 and fp8_e5m2, unscaled) are the CPU kernels' only.
enum class KvDtype : int32_t { kF32, kF16, kBF16, kFp8E4M3, kFp8E5M2 };

PAGELLM_HOST_DEVICE constexpr int64_t KvDtypeBytes(KvDtype t) {
  return t == KvDtype::kF32 ? 4 : (t == KvDtype::kFp8E4M3 || t == KvDtype::kFp8E5M2) ? 1 : 2;
}
PAGELLM_HOST_DEVICE constexpr bool IsFp8(KvDtype t) {
  return t == KvDtype::kFp8E4M3 || t == KvDtype::kFp8E5M2;
}

// The shape of one layer's pool, without its memory.
struct PagedKvShape {
  KvDtype dtype = KvDtype::kF16;
  int64_t block_size = 16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_stride = 0;  // elements from one block to the next; 0: block_elems()

  // Elements one block holds in one of K or V.
  [[nodiscard]] PAGELLM_HOST_DEVICE constexpr int64_t block_elems() const {
    return num_kv_heads * block_size * head_dim;
  }
  [[nodiscard]] PAGELLM_HOST_DEVICE constexpr int64_t stride() const {
    return block_stride > 0 ? block_stride : block_elems();
  }
  [[nodiscard]] PAGELLM_HOST_DEVICE constexpr int64_t block_bytes() const {
    return block_elems() * KvDtypeBytes(dtype);
  }
  // Element offset of (slot, head) in K or V: the start of head_dim contiguous values.
  [[nodiscard]] PAGELLM_HOST_DEVICE constexpr int64_t offset(int64_t slot, int64_t head) const {
    return (slot / block_size) * stride() + (head * block_size + slot % block_size) * head_dim;
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
  int64_t block_stride = 0;  // as PagedKvShape::block_stride

  [[nodiscard]] PAGELLM_HOST_DEVICE constexpr PagedKvShape shape() const {
    return {dtype, block_size, num_kv_heads, head_dim, block_stride};
  }
};

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_PAGED_KV_H_
