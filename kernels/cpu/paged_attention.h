// Paged attention on CPU: keys and values live in fixed-size blocks anywhere in a pool, and
// each sequence's block table maps its logical blocks to physical ones.
//
// The cache layout is kernels/paged_kv.h's, dense (block_stride 0) with fp32, fp16 or fp8 (E4M3,
// E5M2: common/fp8.h) elements. Keys and values are rounded to the cache's type when written
// and widened exactly to fp32 when read, so the attention is that of the rounded values.
//
// Determinism: a token's output depends only on its query, its position and the keys/values at
// positions 0..pos of its sequence, visited in position order in chunks of 16 with an online
// softmax (kernels/cpu/attention_tile.h states the operations); neither the batch composition,
// the query tiles nor the block size changes the fp32 operations performed.
#ifndef PAGELLM_KERNELS_CPU_PAGED_ATTENTION_H_
#define PAGELLM_KERNELS_CPU_PAGED_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/paged_kv.h"

namespace pagellm::kernels {

// Stores token t's key and value (num_kv_heads * head_dim floats at k + t * stride, v + t *
// stride) into slot slots[t]. REQUIRES: every slot is inside the pool.
void WriteKv(const PagedKvLayer& layer, const float* k, const float* v, int64_t stride,
             int64_t num_tokens, const int64_t* slots);

struct AttentionBatch {
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  float scale = 1.0f;
  const float* q = nullptr;  // token t, head h at q + t * q_stride + h * head_dim
  int64_t q_stride = 0;
  float* out = nullptr;  // same layout with out_stride
  int64_t out_stride = 0;
  const int32_t* token_seq = nullptr;     // [num_tokens] row of block_tables
  const int32_t* token_pos = nullptr;     // [num_tokens] attends to positions 0..pos
  const int32_t* block_tables = nullptr;  // [num_seqs][max_blocks_per_seq]
  int64_t max_blocks_per_seq = 0;
};

// Scratch: the batch's query tiles, and per thread each position's K/V row offset and the
// tile's buffers. Grows to the largest batch and longest context seen, then stays.
struct AttentionWorkspace {
  struct Scratch {
    std::vector<int64_t> rows;
    std::vector<int64_t> next_rows;  // the thread's next task's, computed ahead to prefetch
    std::vector<float> tile;
  };
  std::vector<Scratch> per_thread;
  std::vector<int64_t> tiles;
};

// Causal attention of every token over its own sequence. REQUIRES: the keys/values of every
// position attended to were written (WriteKv) before the call; num_heads % num_kv_heads == 0.
void PagedAttention(const PagedKvLayer& layer, const AttentionBatch& batch,
                    AttentionWorkspace* workspace, ThreadPool* pool);

namespace internal {
// n floats to IEEE fp16 (FloatToHalf's bits), with F16C when `vector` and the CPU has AVX2
// (16 at a time with AVX-512, 8 with AVX2), else one by one. WriteKv's conversion; tests
// compare the two.
void FloatsToHalves(const float* x, int64_t n, uint16_t* h, bool vector);
// n floats to fp8 codes of type `t` (kFp8E4M3 or kFp8E5M2: FloatToFp8E4M3's / FloatToFp8E5M2's),
// 8 at a time when `vector` and the CPU has AVX2, else one by one. WriteKv's conversion; tests
// compare the two.
void FloatsToFp8(const float* x, int64_t n, KvDtype t, uint8_t* out, bool vector);
// n fp8 values of type `t` (kFp8E4M3 or kFp8E5M2) widened to floats, exactly (Fp8E4M3ToFloat's
// values, NaN codes to NaN), with F16C when `vector` and the CPU has AVX2. REQUIRES: n % 16 == 0
// when `vector`.
void Fp8ToFloats(const uint8_t* x, int64_t n, KvDtype t, float* out, bool vector);

// PagedAttention with the query-tile kernels (attention_tile.h) allowed or not (then every token
// runs the generic loop); tests compare the two: they must be bit-identical.
void PagedAttentionTasks(const PagedKvLayer& layer, const AttentionBatch& batch,
                         AttentionWorkspace* workspace, ThreadPool* pool, bool specialized);
// The generic loop with the portable dot products and axpys (`portable`) or the CPU's vector
// ones: the same bits (tests compare them).
void PagedAttentionGeneric(const PagedKvLayer& layer, const AttentionBatch& batch,
                           AttentionWorkspace* workspace, ThreadPool* pool, bool portable);
}  // namespace internal

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_PAGED_ATTENTION_H_
