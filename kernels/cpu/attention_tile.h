// Flash-style attention of a query tile: several queries of one sequence (with all the query
// heads of one KV head) against that sequence's paged keys and values, 16 positions at a time,
// with an online softmax. Each 16-position chunk of K and V is read from the pool (and widened
// from fp16) once for the whole tile, into a per-thread buffer the tile's rows then stream from
// L1; with AVX-512, K goes there transposed (16 positions per vector), so that the scores need
// no lane reductions. Per chunk, all the tile's rows first get their scores, then the softmax
// step runs 16 rows at a time with row r in lane r (the rows' maxima, factors and sums as
// vectors, not as one scalar chain per row), then the rows take their values.
//
// The arithmetic is defined per query row, and neither the tile nor the CPU changes it (the
// generic loop in paged_attention.cc performs it one query at a time, and tests compare the
// two bitwise). For the chunk of positions [c, c + 16) of which n are causal (n = min(16, pos +
// 1 - c)):
//   s_j  = Dot16(q, k_j) * scale for j < n, else -inf   (Dot16: 16 fma lanes, ReduceLanes16)
//   m'   = max(m, max_j s_j)          corr = m == -inf ? 0 : ExpApprox(m - m')
//   p_j  = ExpApprox(s_j - m') for j < n, else 0
//   l    = l * corr + ReduceLanes16(p)
//   o    = o * corr, then o = fma(p_j, v_j, o) for j = 0 .. n - 1 in order
// and the output is o * (1 / l). Chunks start at multiples of 16 whatever the block size.
//
// Internal to kernels/cpu. Thread-compatible: each call writes only its scratch and outputs.
#ifndef PAGELLM_KERNELS_CPU_ATTENTION_TILE_H_
#define PAGELLM_KERNELS_CPU_ATTENTION_TILE_H_

#include <cstdint>

#include "kernels/paged_kv.h"

namespace pagellm::kernels::internal {

// Positions per chunk (the online softmax's step), fixed: it is part of the arithmetic.
constexpr int64_t kAttentionChunk = 16;

struct AttentionTileArgs {
  const PagedKvLayer* layer = nullptr;
  // Byte offset of the K (and V) row of each position 0 .. max(pos) for this KV head.
  const int64_t* kv_rows = nullptr;
  int64_t num_queries = 0;
  int64_t group = 0;         // query heads per KV head
  const float* q = nullptr;  // query i, head g at q + i * q_stride + g * head_dim
  int64_t q_stride = 0;
  float* out = nullptr;  // same layout with out_stride
  int64_t out_stride = 0;
  const int32_t* pos = nullptr;  // [num_queries] query i attends to positions 0 .. pos[i]
  float scale = 1.0f;
  float* scratch = nullptr;  // AttentionTileScratch() floats, 64-byte aligned
};

// Floats of scratch a tile of `rows` (queries x group) rows needs (64-byte aligned once the
// caller aligns its start: the last 16 floats are the room for that).
constexpr int64_t AttentionTileScratch(int64_t rows, int64_t head_dim) {
  const int64_t rows16 = (rows + 15) / 16 * 16;
  return (2 * kAttentionChunk + 1 + 2 * rows) * head_dim + rows16 * (kAttentionChunk + 3) + 16;
}

using AttentionTileFn = void (*)(const AttentionTileArgs&);

// The tile kernel for head_dim with AVX-512 or AVX2 vectors, or null where the shape has none
// (head_dim 64 and 128 do). REQUIRES for calling it: the CPU has the instruction set.
AttentionTileFn AttentionTileAvx512(int64_t head_dim);
AttentionTileFn AttentionTileAvx2(int64_t head_dim);

}  // namespace pagellm::kernels::internal

#endif  // PAGELLM_KERNELS_CPU_ATTENTION_TILE_H_
