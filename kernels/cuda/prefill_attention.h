// Paged prefill attention on tensor cores: the prefill chunks of a step (a prompt, or a chunk of
// one over its cached prefix) attend causally to their sequence's positions 0 .. their own,
// reading K/V through the block table (kernels/paged_kv.h), FlashAttention-2 style: a thread
// block takes one tile of a chunk's consecutive tokens for one KV head -- its rows are (token,
// query head of that KV head) pairs, so GQA reads each key tile once for every query head --
// and walks the keys in tiles of 64 with an online softmax; Q K^T and P V are bf16/fp16
// mma.sync (m16n8k16) with fp32 accumulation, P rounded to the input type as FlashAttention
// does. The other tokens of a step (decode rows, short chunks) go to paged_attention.h's kernel,
// which splits long contexts: SplitAttentionStep decides.
//
// head_dim 64 or 128; kBF16 or kF16; up to 64 query heads per KV head. Launchers never allocate
// and return cudaError_t (cudaErrorInvalidValue for anything else). All pointers are device
// pointers unless a comment says host.
#ifndef PAGELLM_KERNELS_CUDA_PREFILL_ATTENTION_H_
#define PAGELLM_KERNELS_CUDA_PREFILL_ATTENTION_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/paged_kv.h"

namespace pagellm::kernels::cuda {

inline constexpr int kPrefillTileRows = 64;  // (token, head) rows per thread block

// Consecutive tokens [token_begin, + num_tokens) of one sequence, at consecutive positions.
struct PrefillTile {
  int32_t token_begin = 0;
  int32_t num_tokens = 0;
};

// Tokens per tile for a GQA ratio: kPrefillTileRows / (num_heads / num_kv_heads); 0 when the
// ratio is not supported (over 64). Host code.
int PrefillTileTokens(int64_t num_heads, int64_t num_kv_heads);

// Host code. The rows of a step (query_start: [num_seqs + 1] first token of each row, host
// memory) with at least max(2, tile_tokens / 2) tokens become tiles of up to tile_tokens tokens;
// every other token is listed in `other` (for paged_attention.h's `tokens`). tile_tokens 0: no
// tiles. Reuses the vectors' capacity.
void SplitAttentionStep(const int32_t* query_start, int64_t num_seqs, int tile_tokens,
                        std::vector<PrefillTile>* tiles, std::vector<int32_t>* other);

struct PrefillAttentionParams {
  const void* q = nullptr;  // token t, head h at q + t * q_stride + h * head_dim (elements)
  int64_t q_stride = 0;
  void* out = nullptr;  // same layout with out_stride
  int64_t out_stride = 0;
  PagedKvLayer kv;
  const int32_t* token_seq = nullptr;     // [step tokens] row of block_tables
  const int32_t* positions = nullptr;     // [step tokens] attends to 0 .. positions[t]
  const int32_t* block_tables = nullptr;  // [num_seqs][block_table_stride]
  int64_t block_table_stride = 0;
  const PrefillTile* tiles = nullptr;  // [num_tiles]
  int64_t num_tiles = 0;
  int64_t num_heads = 0;
  float scale = 1.0f;  // softmax scale, usually 1/sqrt(head_dim)
};

// out = softmax(q k^T * scale) v for every token of every tile and every head. REQUIRES: each
// tile's tokens belong to one sequence at consecutive positions, with at most
// PrefillTileTokens(num_heads, kv.num_kv_heads) tokens; every position they attend to was
// written before the launch (same stream).
cudaError_t LaunchPrefillAttention(const PrefillAttentionParams& p, cudaStream_t stream);

}  // namespace pagellm::kernels::cuda

#endif  // PAGELLM_KERNELS_CUDA_PREFILL_ATTENTION_H_
