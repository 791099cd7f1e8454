// Two-pass softmax per (token, kv head): scores for all positions of the group's query heads,
// then the softmax (ops.h's SoftmaxRows), and the probability-weighted sum of values, in
// position order. Each task first lists its positions' row offsets, block by block. The AVX-512,
// AVX2 and portable variants differ only in how dot products and axpys are vectorized; for the
// common (head_dim, group) shapes the AVX-512 task also reads each K/V row once for the whole
// group and keeps the outputs in registers, with the same operations per element.
#include "kernels/cpu/paged_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/ops.h"

namespace pagellm::kernels {
namespace {

// --- portable ---
// Both paths accumulate dot products in 16 lanes (lane i % 16) with fma and reduce the lanes
// with ReduceLanes16; axpy is one fma per element. So they are bit-identical.
float DotPortable(const float* q, const void* k, KvDtype t, int64_t n) {
  float lanes[16] = {};
  if (t == KvDtype::kF32) {
    const float* kf = static_cast<const float*>(k);
    for (int64_t i = 0; i < n; ++i) lanes[i % 16] = std::fma(q[i], kf[i], lanes[i % 16]);
  } else {
    const uint16_t* kh = static_cast<const uint16_t*>(k);
    for (int64_t i = 0; i < n; ++i)
      lanes[i % 16] = std::fma(q[i], HalfToFloat(kh[i]), lanes[i % 16]);
  }
  return ReduceLanes16(lanes);
}

void AxpyPortable(float a, const void* v, KvDtype t, int64_t n, float* out) {
  if (t == KvDtype::kF32) {
    const float* vf = static_cast<const float*>(v);
    for (int64_t i = 0; i < n; ++i) out[i] = std::fma(a, vf[i], out[i]);
  } else {
    const uint16_t* vh = static_cast<const uint16_t*>(v);
    for (int64_t i = 0; i < n; ++i) out[i] = std::fma(a, HalfToFloat(vh[i]), out[i]);
  }
}

// --- AVX-512 (head_dim % 16 == 0) ---
__attribute__((target("avx512f,avx512vl,fma,f16c"))) inline __m512 Load16(const void* p, KvDtype t,
                                                                          int64_t i) {
  if (t == KvDtype::kF32) return _mm512_loadu_ps(static_cast<const float*>(p) + i);
  return _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i)));
}

__attribute__((target("avx512f,avx512vl,fma,f16c"))) float DotAvx512(const float* q, const void* k,
                                                                     KvDtype t, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), Load16(k, t, i), acc);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  return ReduceLanes16(lanes);
}

__attribute__((target("avx512f,avx512vl,fma,f16c"))) void AxpyAvx512(float a, const void* v,
                                                                     KvDtype t, int64_t n,
                                                                     float* out) {
  const __m512 av = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += 16) {
    _mm512_storeu_ps(out + i, _mm512_fmadd_ps(av, Load16(v, t, i), _mm512_loadu_ps(out + i)));
  }
}

// --- AVX2 (head_dim % 16 == 0): the 16 lanes in two 256-bit vectors ---
__attribute__((target("avx2,fma,f16c"))) inline __m256 Load8(const void* p, KvDtype t, int64_t i) {
  if (t == KvDtype::kF32) return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  return _mm256_cvtph_ps(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i)));
}

__attribute__((target("avx2,fma,f16c"))) float DotAvx2(const float* q, const void* k, KvDtype t,
                                                       int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), Load8(k, t, i), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), Load8(k, t, i + 8), hi);
  }
  alignas(32) float lanes[16];
  _mm256_store_ps(lanes, lo);
  _mm256_store_ps(lanes + 8, hi);
  return ReduceLanes16(lanes);
}

__attribute__((target("avx2,fma,f16c"))) void AxpyAvx2(float a, const void* v, KvDtype t, int64_t n,
                                                       float* out) {
  const __m256 av = _mm256_set1_ps(a);
  for (int64_t i = 0; i < n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(av, Load8(v, t, i), _mm256_loadu_ps(out + i)));
  }
}

// A task's K and V rows sit in 2 KB runs (one block of one KV head) scattered over the pool,
// too short for the hardware prefetcher to follow: each row is requested this many positions
// (about two blocks, a few hundred nanoseconds of work) before it is read. While the scores
// are computed, the V rows are requested into L2 as well, so that the second pass does not
// start from DRAM.
constexpr int64_t kPrefetchAhead = 32;

// Requests `bytes` at base + offset into L1 (_MM_HINT_T0) or L2 (_MM_HINT_T1).
template <int kHint = _MM_HINT_T0>
inline void Prefetch(const void* base, int64_t offset, int64_t bytes) {
  const char* p = static_cast<const char*>(base) + offset;
  for (int64_t i = 0; i < bytes; i += 64) _mm_prefetch(p + i, static_cast<_mm_hint>(kHint));
}

// The context of one (token, KV head) task.
struct Task {
  const PagedKvLayer* layer;
  const int64_t* rows;  // [ctx] byte offset of each position's K (and V) row
  int64_t ctx;
  const float* q0;  // the group's query heads, head_dim apart
  float* o0;        // their outputs
  float scale;
  float* scores;  // [group][ctx]
};

// The byte offsets of positions 0..ctx-1's rows of KV head kvh, block by block: one table
// lookup per block rather than a division per position.
void RowOffsets(const PagedKvLayer& layer, const int32_t* table, int64_t ctx, int64_t kvh,
                int64_t* rows) {
  const int64_t bs = layer.block_size, row_bytes = layer.head_dim * KvDtypeBytes(layer.dtype);
  for (int64_t b = 0, p = 0; p < ctx; ++b) {
    const int64_t base = (static_cast<int64_t>(table[b]) * layer.num_kv_heads + kvh) * bs;
    for (int64_t j = 0; j < bs && p < ctx; ++j, ++p) rows[p] = (base + j) * row_bytes;
  }
}

// ReduceLanes16 of 16 rows at once (rows[j] = one position's 16 lanes): the same additions in
// the same pairs (lanes i and i + 8, then 4, 2, 1 apart), as a butterfly across the rows that
// leaves position j's sum in lane j.
__attribute__((target("avx512f"))) inline __m512 ReduceRows16(const float (*rows)[16]) {
  __m512 w[8], x[4], y[2];
  for (int m = 0; m < 8; ++m) {
    const __m512 a = _mm512_load_ps(rows[2 * m]), b = _mm512_load_ps(rows[2 * m + 1]);
    w[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int n = 0; n < 4; ++n) {
    x[n] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * n], w[2 * n + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(w[2 * n], w[2 * n + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  for (int s = 0; s < 2; ++s) {
    y[s] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * s], x[2 * s + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(x[2 * s], x[2 * s + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane k of `sums` holds row 4 (k % 4) + k / 4: a 4 x 4 transpose, its own inverse.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, sums);
}

// One task on AVX-512 for head_dim = 16 C and G query heads per KV head: each K and V row is
// loaded (and widened) once for all G heads, and the G output rows stay in registers. Per
// (head, position) the operations are the generic loop's, in the same order: bit-identical.
// GCC 12 reports its own _mm512_cvtph_ps as maybe-uninitialized when inlined into arrays.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <int C, int G>
__attribute__((target("avx512f,avx512vl,fma,f16c"))) void TaskAvx512(const Task& t) {
  const PagedKvLayer& layer = *t.layer;
  const int64_t hd = 16 * C;
  const int64_t* row = t.rows;
  const int64_t row_bytes = hd * KvDtypeBytes(layer.dtype);
  for (int64_t p = 0; p < std::min<int64_t>(t.ctx, kPrefetchAhead); ++p) {
    Prefetch(layer.k, row[p], row_bytes);
  }
  __m512 q[G][C];
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < C; ++c) q[g][c] = _mm512_loadu_ps(t.q0 + g * hd + 16 * c);
  }
  // Scores 16 positions at a time: each position's 16 lanes per head, then one butterfly.
  alignas(64) float rows[G][16][16];
  const __m512 scale = _mm512_set1_ps(t.scale);
  int64_t p0 = 0;
  for (; p0 + 16 <= t.ctx; p0 += 16) {
    for (int j = 0; j < 16; ++j) {
      if (p0 + kPrefetchAhead + j < t.ctx) {
        Prefetch(layer.k, row[p0 + kPrefetchAhead + j], row_bytes);
        Prefetch<_MM_HINT_T1>(layer.v, row[p0 + kPrefetchAhead + j], row_bytes);
      }
      const void* kp = static_cast<const char*>(layer.k) + row[p0 + j];
      __m512 k[C];
      for (int c = 0; c < C; ++c) k[c] = Load16(kp, layer.dtype, 16 * c);
      for (int g = 0; g < G; ++g) {
        __m512 acc = _mm512_setzero_ps();
        for (int c = 0; c < C; ++c) acc = _mm512_fmadd_ps(q[g][c], k[c], acc);
        _mm512_store_ps(rows[g][j], acc);
      }
    }
    for (int g = 0; g < G; ++g) {
      _mm512_storeu_ps(t.scores + g * t.ctx + p0, _mm512_mul_ps(ReduceRows16(rows[g]), scale));
    }
  }
  alignas(64) float lanes[16];
  for (int64_t p = p0; p < t.ctx; ++p) {
    const void* kp = static_cast<const char*>(layer.k) + row[p];
    __m512 k[C];
    for (int c = 0; c < C; ++c) k[c] = Load16(kp, layer.dtype, 16 * c);
    for (int g = 0; g < G; ++g) {
      __m512 acc = _mm512_setzero_ps();
      for (int c = 0; c < C; ++c) acc = _mm512_fmadd_ps(q[g][c], k[c], acc);
      _mm512_store_ps(lanes, acc);
      t.scores[g * t.ctx + p] = ReduceLanes16(lanes) * t.scale;
    }
  }
  for (int64_t p = 0; p < std::min<int64_t>(t.ctx, kPrefetchAhead); ++p) {
    Prefetch(layer.v, row[p], row_bytes);
  }
  SoftmaxRows(t.scores, G, t.ctx, t.ctx);
  __m512 o[G][C];
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < C; ++c) o[g][c] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < t.ctx; ++p) {
    if (p + kPrefetchAhead < t.ctx) Prefetch(layer.v, row[p + kPrefetchAhead], row_bytes);
    const void* vp = static_cast<const char*>(layer.v) + row[p];
    __m512 v[C];
    for (int c = 0; c < C; ++c) v[c] = Load16(vp, layer.dtype, 16 * c);
    for (int g = 0; g < G; ++g) {
      const __m512 a = _mm512_set1_ps(t.scores[g * t.ctx + p]);
      for (int c = 0; c < C; ++c) o[g][c] = _mm512_fmadd_ps(a, v[c], o[g][c]);
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(t.o0 + g * hd + 16 * c, o[g][c]);
  }
}

using TaskFn = void (*)(const Task&);

// The specialized task for (head_dim, group), or null.
TaskFn FastTask(int64_t hd, int64_t group) {
  if (hd == 64) {
    switch (group) {
      case 1:
        return TaskAvx512<4, 1>;
      case 2:
        return TaskAvx512<4, 2>;
      case 3:
        return TaskAvx512<4, 3>;
      case 4:
        return TaskAvx512<4, 4>;
      default:
        return nullptr;
    }
  }
  if (hd == 128) {
    switch (group) {
      case 1:
        return TaskAvx512<8, 1>;
      case 2:
        return TaskAvx512<8, 2>;
      case 4:  // Llama-3-8B's shape; q does not fit the registers, its loads come from L1
        return TaskAvx512<8, 4>;
      default:
        return nullptr;
    }
  }
  return nullptr;
}

#pragma GCC diagnostic pop

// hd floats to fp16, rounding to nearest even: F16C's conversion rounds as FloatToHalf and, like
// it, keeps a NaN quiet with the top payload bits, so both give the same bits.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx2,f16c"))) void FloatsToHalvesAvx2(const float* x, int64_t n,
                                                             uint16_t* h) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) h[i] = FloatToHalf(x[i]);
}

__attribute__((target("avx512f,f16c"))) void FloatsToHalvesAvx512(const float* x, int64_t n,
                                                                  uint16_t* h) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) h[i] = FloatToHalf(x[i]);
}
#pragma GCC diagnostic pop

}  // namespace

namespace internal {
void FloatsToHalves(const float* x, int64_t n, uint16_t* h, bool vector) {
  if (vector && GetCpuFeatures().avx512) return FloatsToHalvesAvx512(x, n, h);
  if (vector && GetCpuFeatures().avx2) return FloatsToHalvesAvx2(x, n, h);
  for (int64_t i = 0; i < n; ++i) h[i] = FloatToHalf(x[i]);
}
}  // namespace internal

void WriteKv(const PagedKvLayer& layer, const float* k, const float* v, int64_t stride,
             int64_t num_tokens, const int64_t* slots) {
  const int64_t hd = layer.head_dim, bs = layer.block_size, nkv = layer.num_kv_heads;
  const int64_t eb = KvDtypeBytes(layer.dtype);
  const bool vector = GetCpuFeatures().avx2;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t block = slots[t] / bs, off = slots[t] % bs;
    for (int64_t h = 0; h < nkv; ++h) {
      const int64_t dst = ((block * nkv + h) * bs + off) * hd;
      const float* ks = k + t * stride + h * hd;
      const float* vs = v + t * stride + h * hd;
      if (layer.dtype == KvDtype::kF32) {
        std::memcpy(static_cast<float*>(layer.k) + dst, ks, hd * eb);
        std::memcpy(static_cast<float*>(layer.v) + dst, vs, hd * eb);
      } else {
        internal::FloatsToHalves(ks, hd, static_cast<uint16_t*>(layer.k) + dst, vector);
        internal::FloatsToHalves(vs, hd, static_cast<uint16_t*>(layer.v) + dst, vector);
      }
    }
  }
}

namespace {
// The attention of every (token, KV head) task: the AVX-512 tasks specialized for the shape
// where allowed and the CPU has them, else the generic loop (vector unless `portable`).
void RunAttention(const PagedKvLayer& layer, const AttentionBatch& batch,
                  AttentionWorkspace* workspace, ThreadPool* pool, bool specialized, bool portable);
}  // namespace

void PagedAttention(const PagedKvLayer& layer, const AttentionBatch& batch,
                    AttentionWorkspace* workspace, ThreadPool* pool) {
  internal::PagedAttentionTasks(layer, batch, workspace, pool, /*specialized=*/true);
}

void internal::PagedAttentionTasks(const PagedKvLayer& layer, const AttentionBatch& batch,
                                   AttentionWorkspace* workspace, ThreadPool* pool,
                                   bool specialized) {
  RunAttention(layer, batch, workspace, pool, specialized, /*portable=*/false);
}

void internal::PagedAttentionGeneric(const PagedKvLayer& layer, const AttentionBatch& batch,
                                     AttentionWorkspace* workspace, ThreadPool* pool,
                                     bool portable) {
  RunAttention(layer, batch, workspace, pool, /*specialized=*/false, portable);
}

namespace {

void RunAttention(const PagedKvLayer& layer, const AttentionBatch& batch,
                  AttentionWorkspace* workspace, ThreadPool* pool, bool specialized,
                  bool portable) {
  const int64_t hd = layer.head_dim, nkv = layer.num_kv_heads;
  const int64_t group = batch.num_heads / nkv;
  const CpuFeatures& cpu = GetCpuFeatures();
  const bool fast = !portable && cpu.avx512 && hd % 16 == 0;
  const bool avx2 = !portable && cpu.avx2 && hd % 16 == 0;
  auto dot = fast ? DotAvx512 : avx2 ? DotAvx2 : DotPortable;
  auto axpy = fast ? AxpyAvx512 : avx2 ? AxpyAvx2 : AxpyPortable;
  const TaskFn fast_task = fast && specialized ? FastTask(hd, group) : nullptr;

  const int threads = pool != nullptr ? pool->num_threads() : 1;
  if (static_cast<int>(workspace->per_thread.size()) < threads)
    workspace->per_thread.resize(threads);
  int64_t max_ctx = 0;
  for (int64_t t = 0; t < batch.num_tokens; ++t)
    max_ctx = std::max<int64_t>(max_ctx, batch.token_pos[t] + 1);
  for (auto& s : workspace->per_thread) {
    if (static_cast<int64_t>(s.scores.size()) < max_ctx * group) s.scores.resize(max_ctx * group);
    if (static_cast<int64_t>(s.rows.size()) < max_ctx) s.rows.resize(max_ctx);
  }

  auto work = [&](int64_t begin, int64_t end, int thread) {
    float* scores = workspace->per_thread[thread].scores.data();
    int64_t* rows = workspace->per_thread[thread].rows.data();
    for (int64_t task = begin; task < end; ++task) {
      const int64_t t = task / nkv, kvh = task % nkv;
      const int64_t ctx = batch.token_pos[t] + 1;
      const int32_t* table = batch.block_tables + batch.token_seq[t] * batch.max_blocks_per_seq;
      const float* q0 = batch.q + t * batch.q_stride + kvh * group * hd;
      float* o0 = batch.out + t * batch.out_stride + kvh * group * hd;
      RowOffsets(layer, table, ctx, kvh, rows);
      if (fast_task != nullptr) {
        fast_task(Task{&layer, rows, ctx, q0, o0, batch.scale, scores});
        continue;
      }
      for (int64_t p = 0; p < ctx; ++p) {
        const void* kp = static_cast<const char*>(layer.k) + rows[p];
        for (int64_t g = 0; g < group; ++g)
          scores[g * ctx + p] = dot(q0 + g * hd, kp, layer.dtype, hd) * batch.scale;
      }
      SoftmaxRows(scores, group, ctx, ctx);
      for (int64_t g = 0; g < group; ++g) std::memset(o0 + g * hd, 0, hd * sizeof(float));
      for (int64_t p = 0; p < ctx; ++p) {
        const void* vp = static_cast<const char*>(layer.v) + rows[p];
        for (int64_t g = 0; g < group; ++g)
          axpy(scores[g * ctx + p], vp, layer.dtype, hd, o0 + g * hd);
      }
    }
  };
  const int64_t tasks = batch.num_tokens * nkv;
  if (pool != nullptr) {
    pool->ParallelFor(tasks, work);
  } else {
    work(0, tasks, 0);
  }
}

}  // namespace
}  // namespace pagellm::kernels
