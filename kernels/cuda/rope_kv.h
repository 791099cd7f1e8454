// Rotary embedding fused with writing K and V into their paged slots (and, for Qwen2, the Q/K/V
// bias added first). Reads one step's fused QKV projection; rotates Q in place (attention reads
// it next) and writes rotated K and V only to the cache. (cf. vLLM's reshape_and_cache fused
// with rotary_embedding.)
//
// Launchers never allocate and return cudaError_t. All pointers are device pointers.
#ifndef PAGELLM_KERNELS_CUDA_ROPE_KV_H_
#define PAGELLM_KERNELS_CUDA_ROPE_KV_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/paged_kv.h"

namespace pagellm::kernels::cuda {

struct RopeKvParams {
  // [num_tokens][qkv_stride] in kv.dtype: num_heads Q heads, then num_kv_heads K heads, then
  // num_kv_heads V heads, each head_dim (= kv.head_dim) elements.
  void* qkv = nullptr;
  int64_t qkv_stride = 0;
  const float* bias = nullptr;         // optional [(num_heads + 2 * num_kv_heads) * head_dim]
  const int32_t* positions = nullptr;  // [num_tokens]
  const int64_t* slots = nullptr;      // [num_tokens]
  // [max_position][head_dim / 2] (cos, sin) pairs for frequency i (worker/model/rope_table.h).
  const float* cos_sin = nullptr;
  bool neox = true;  // rotate pairs (i, i + d/2); false: (2i, 2i + 1)
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  PagedKvLayer kv;  // kBF16 or kF16; num_kv_heads and head_dim of the model
};

// For every token t: Q heads (+ bias) rotated by positions[t] in place; K heads (+ bias) rotated
// and V heads (+ bias) written to slot slots[t] of kv. REQUIRES: slots inside the pool;
// positions inside the table; head_dim even.
cudaError_t LaunchRopeKv(const RopeKvParams& p, cudaStream_t stream);

}  // namespace pagellm::kernels::cuda

#endif  // PAGELLM_KERNELS_CUDA_ROPE_KV_H_
