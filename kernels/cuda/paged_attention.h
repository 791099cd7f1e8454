// Paged attention on the GPU: every query token attends causally to positions 0 .. its own of
// its sequence, reading K/V through the block table (kernels/paged_kv.h's layout). One kernel
// serves decode rows and prefill chunks alike, which makes chunked prefill and prefix-cache hits
// plain cases: a chunk's tokens see the cached prefix and each other up to their position.
//
// Work split (cf. FlashInfer's decode kernel and vLLM's paged_attention_v2): one thread block per
// (token, KV head, context split) handles the up-to-8 query heads that share that KV head, so
// GQA reads each key once for all of them. A split walks its context range in chunks with an
// online softmax; when a step has few tokens, the context is cut into several splits that run in
// parallel and a second kernel merges them (log-sum-exp). PlanPagedAttention picks the split.
//
// Any GQA ratio (query heads are taken up to 8 per block); head_dim 64 or 128; kBF16 or kF16.
// Launchers never allocate and return cudaError_t (cudaErrorInvalidValue for anything else).
// All pointers are device pointers.
#ifndef PAGELLM_KERNELS_CUDA_PAGED_ATTENTION_H_
#define PAGELLM_KERNELS_CUDA_PAGED_ATTENTION_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/paged_kv.h"

namespace pagellm::kernels::cuda {

// Context positions one split reads per chunk; split lengths are multiples of it.
inline constexpr int32_t kAttentionChunk = 256;
// Most splits per token.
inline constexpr int32_t kMaxAttentionSplits = 64;

struct PagedAttentionPlan {
  int32_t num_splits = 1;
  int32_t split_len = kAttentionChunk;  // positions per split, a multiple of kAttentionChunk
};

// Floats of merge workspace a launch with `splits` splits over `num_tokens` tokens of
// `num_heads` heads of `head_dim` needs (0 for one split).
constexpr int64_t PagedAttentionWorkspaceFloats(int64_t num_tokens, int64_t num_heads,
                                                int64_t head_dim, int32_t splits) {
  return splits <= 1 ? 0 : splits * num_tokens * num_heads * (head_dim + 2);
}

// The split for a step of `num_tokens` tokens whose longest context is `max_context`: enough
// thread blocks to fill `num_sms` multiprocessors twice, no split shorter than one chunk, and at
// most `max_split_rows` (token, split) pairs so that the workspace stays bounded. Host code.
PagedAttentionPlan PlanPagedAttention(int64_t num_tokens, int64_t num_heads, int64_t num_kv_heads,
                                      int64_t max_context, int num_sms, int64_t max_split_rows);

struct PagedAttentionParams {
  const void* q = nullptr;  // token t, head h at q + t * q_stride + h * head_dim (elements)
  int64_t q_stride = 0;
  void* out = nullptr;  // same layout with out_stride
  int64_t out_stride = 0;
  PagedKvLayer kv;
  const int32_t* token_seq = nullptr;     // [num_tokens] row of block_tables
  const int32_t* positions = nullptr;     // [num_tokens] attends to 0 .. positions[t]
  const int32_t* block_tables = nullptr;  // [num_seqs][block_table_stride]
  int64_t block_table_stride = 0;
  int64_t num_tokens = 0;
  // When set, the launch covers the step's tokens tokens[0, num_tokens) only (q, out, token_seq
  // and positions are indexed by them; the workspace by the launch's own index): the tokens
  // that prefill_attention.h's tiles leave.
  const int32_t* tokens = nullptr;
  int64_t num_heads = 0;
  float scale = 1.0f;  // softmax scale, usually 1/sqrt(head_dim)
  PagedAttentionPlan plan;
  // PagedAttentionWorkspaceFloats(num_tokens, num_heads, head_dim, plan.num_splits) floats.
  float* workspace = nullptr;
};

// out = softmax(q k^T * scale) v per token and head, in kv.dtype. REQUIRES: every position a
// token attends to was written to the cache before the launch (on the same stream); the plan's
// splits cover the longest context (num_splits * split_len >= max positions + 1);
// num_heads % num_kv_heads == 0.
cudaError_t LaunchPagedAttention(const PagedAttentionParams& p, cudaStream_t stream);

}  // namespace pagellm::kernels::cuda

#endif  // PAGELLM_KERNELS_CUDA_PAGED_ATTENTION_H_
