// The tile kernel of attention_tile.h, written once over a 16-lane vector type V that each
// instruction-set file defines before including this (attention_tile_avx512.cc: one __m512;
// attention_tile_avx2.cc: two __m256). V provides, lane by lane and exactly as the scalar
// operations: Zero, Set1, Load/Store (16 floats), Fma(a, b, c) = a * b + c rounded once, Add,
// Mul, Sub, Max(a, b) = a > b ? a : b, Exp (ExpApprox), KeepFirst(a, n, fill) (lanes j >= n
// replaced by fill), ZeroWhereNegInf(m, x) (x, with 0 where m is -inf), MaxRows and SumRows
// (lane r: the largest lane, and ReduceLanes16's sum, of the 16-float row r; they read rows 0
// .. RowsRead(count) - 1), Scores<C, kRows>(q, k, out) (row r's lane j = ReduceLanes16 of
// the 16 lanes of fma over the C vectors of q[r] and k[j], in order), HalvesToFloats (16 fp16 to
// fp32) and Pin (its argument, kept in a register). And:
//   - kValueRows<C>: how many consecutive rows run together, sharing each K and V load;
//   - kTransposeK: whether tiles of more than kDirectRows rows transpose each K chunk
//     (Transpose<C>(k rows, kt)) and take their scores from it without lane reductions.
//
// Each including file compiles this with its own target flags, so the kernel sits in an unnamed
// namespace (see quant_unpack_x86.h).
#ifndef PAGELLM_KERNELS_CPU_ATTENTION_TILE_IMPL_H_
#define PAGELLM_KERNELS_CPU_ATTENTION_TILE_IMPL_H_

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/fp8_x86.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/paged_attention.h"

namespace pagellm::kernels::internal {
namespace {  // NOLINT(build/namespaces_headers): see the file comment

constexpr int64_t kChunk = kAttentionChunk;
// A tile's K and V rows sit in short runs (one block of one KV head) scattered over the pool,
// too short for the hardware prefetcher: each chunk's rows are requested two chunks ahead.
constexpr int64_t kPrefetchChunks = 2;

inline void PrefetchRow(const void* base, int64_t offset, int64_t bytes) {
  const char* p = static_cast<const char*>(base) + offset;
  for (int64_t i = 0; i < bytes; i += 64) _mm_prefetch(p + i, _MM_HINT_T0);
}

// Rows [r, r + kRows) of one query (they share n) take the chunk's values: o = o * corr[r],
// then o = fma(p_j, v_j, o) for j < n. kRows rows at once read each value vector once for all.
template <class V, int C, int kRows, typename T>
inline void AccumulateValues(const T* const* vp, const float (*p)[kChunk], const float* corr,
                             int64_t n, float* o, int64_t hd) {
  typename V::R acc[kRows][C];
  for (int r = 0; r < kRows; ++r) {
    const typename V::R c = V::Set1(corr[r]);
    for (int k = 0; k < C; ++k) acc[r][k] = V::Mul(V::Load(o + r * hd + 16 * k), c);
  }
  for (int64_t j = 0; j < n; ++j) {
    typename V::R pj[kRows];
    for (int r = 0; r < kRows; ++r) pj[r] = V::Set1(p[r][j]);
    for (int k = 0; k < C; ++k) {
      const typename V::R v = V::Pin(V::Load(vp[j] + 16 * k));
      for (int r = 0; r < kRows; ++r) acc[r][k] = V::Fma(pj[r], v, acc[r][k]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int k = 0; k < C; ++k) V::Store(o + r * hd + 16 * k, acc[r][k]);
  }
}

// The online-softmax step (attention_tile.h's formulas) of up to 16 rows at once, row r in lane
// r of the per-row quantities (maximum, factor, sum). s[r] holds row r's scores (times the
// scale, not yet masked) and receives its probabilities; n[r] (0 .. 16) of its positions are
// causal. With n[r] = 0 the row sits the chunk out and its m and l keep their bits: the maximum
// stays m, the factor is ExpApprox(0) = 1 and the sum 0. Updates m and l, leaves o's factors in
// corr. Rows count .. V::RowsRead(count) - 1 are padding (scores -inf, probabilities 0); the
// lanes from count on are not used. The maxima may pair lanes in another order than the generic
// loop's std::max: only a zero's sign can differ, and ExpApprox(-0) = ExpApprox(+0) = 1.
template <class V>
inline void SoftmaxRows16(float (*s)[kChunk], const int64_t* n, int count, float* m, float* l,
                          float* corr) {
  using R = typename V::R;
  for (int r = 0; r < count; ++r) {
    if (n[r] < kChunk) V::Store(s[r], V::KeepFirst(V::Load(s[r]), n[r], -INFINITY));
  }
  const int read = V::RowsRead(count);
  for (int r = count; r < read; ++r) V::Store(s[r], V::Set1(-INFINITY));
  const R m_old = V::Load(m);
  const R m_new = V::Max(V::MaxRows(s, count), m_old);  // std::max(m, max_j s_j)
  alignas(64) float shift[16];
  V::Store(shift, m_new);
  const R c = V::ZeroWhereNegInf(m_old, V::Exp(V::Sub(m_old, m_new)));
  for (int r = 0; r < count; ++r) {
    V::Store(s[r], V::KeepFirst(V::Exp(V::Sub(V::Load(s[r]), V::Set1(shift[r]))), n[r], 0.0f));
  }
  for (int r = count; r < read; ++r) V::Store(s[r], V::Zero());
  V::Store(l, V::Add(V::Mul(V::Load(l), c), V::SumRows(s, count)));
  V::Store(m, m_new);
  V::Store(corr, c);
}

// Where the chunk's K rows are: one pointer a position (fp32, or fp16 widened as read), or
// transposed into kt[d * 16 + j] = k_j[d] (fp32).
template <typename T>
struct KRows {
  const T* const* rows;
};
struct KTransposed {
  const float* kt;
};

// Row r's scores s[r] from K rows: Dot16 per position, then the lanes reduced (V::Scores).
template <class V, int C, int kRows, typename T>
inline void RowScores(const float* q, int64_t hd, KRows<T> k, typename V::R* s) {
  typename V::R qv[kRows][C];
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < C; ++c) qv[r][c] = V::Load(q + r * hd + 16 * c);
  }
  V::template Scores<C, kRows, T>(qv, k.rows, s);
}

// The same scores from transposed K, 16 positions in the vector's lanes. Dot16's lane l (the
// fma chain over q[16 c + l] * k[16 c + l], c = 0 .. C - 1) becomes a vector of the positions'
// lane-l sums, and ReduceLanes16's additions (lanes i and i + 8, then 4, 2, 1 apart) become
// additions of those vectors: the same operations on the same values, so the same bits, with
// no shuffles. Each K vector is loaded once for the rows.
template <class V, int C, int kRows>
inline void RowScores(const float* q, int64_t hd, KTransposed k, typename V::R* s) {
  using R = typename V::R;
  const auto lane = [&](int l, R* a) {
    for (int r = 0; r < kRows; ++r) a[r] = V::Zero();
    for (int c = 0; c < C; ++c) {
      const R kv = V::Pin(V::Load(k.kt + (16 * c + l) * 16));
      for (int r = 0; r < kRows; ++r) a[r] = V::Fma(V::Set1(q[r * hd + 16 * c + l]), kv, a[r]);
    }
  };
  // Sum of lanes i and i + step, each itself the sum over its half-size subtree.
  const auto sum = [&](const auto& self, int i, int step, R* out) -> void {
    R x[kRows], y[kRows];
    if (step == 8) {
      lane(i, x);
      lane(i + 8, y);
    } else {
      self(self, i, 2 * step, x);
      self(self, i + step, 2 * step, y);
    }
    for (int r = 0; r < kRows; ++r) out[r] = V::Add(x[r], y[r]);
  };
  sum(sum, 0, 1, s);
}

// Scores times the scale of `run` (1 .. kRows) consecutive rows of the tile, sharing each K
// load.
template <class V, int C, typename K, int kRows = V::template kValueRows<C>>
inline void ScoreRows(int64_t run, const float* q, K k, float scale, float (*s)[kChunk]) {
  if constexpr (kRows > 1) {
    if (run < kRows) return ScoreRows<V, C, K, kRows - 1>(run, q, k, scale, s);
  }
  typename V::R sr[kRows];
  RowScores<V, C, kRows>(q, 16 * C, k, sr);
  for (int r = 0; r < kRows; ++r) V::Store(s[r], V::Mul(sr[r], V::Set1(scale)));
}

// Values of `run` (1 .. kRows) consecutive rows with the same n, sharing each V load.
template <class V, int C, typename T, int kRows = V::template kValueRows<C>>
inline void ValueRows(int64_t run, const T* const* vp, const float (*p)[kChunk], const float* corr,
                      int64_t n, float* o) {
  if constexpr (kRows > 1) {
    if (run < kRows) return ValueRows<V, C, T, kRows - 1>(run, vp, p, corr, n, o);
  }
  AccumulateValues<V, C, kRows, T>(vp, p, corr, n, o, 16 * C);
}

// The tile's working rows (row r = query r / group, head r % group), in the scratch.
struct TileRows {
  int64_t rows = 0;
  float* q = nullptr;            // [rows][head_dim], the queries gathered
  float* o = nullptr;            // [rows][head_dim]
  float (*s)[kChunk] = nullptr;  // [rows16][16] the chunk's scores, then probabilities
  float* m = nullptr;            // [rows16] running maximum
  float* l = nullptr;            // [rows16] running sum
  float* corr = nullptr;         // [rows16] the chunk's factor for o
};

inline int64_t Causal(const AttentionTileArgs& a, int64_t i, int64_t c0) {
  return std::clamp<int64_t>(a.pos[i] + 1 - c0, 0, kChunk);
}

// The chunk at c0 for every row of the tile, with its K rows as k and V rows at vp[j] (fp32,
// or fp16 widened as they are read): first all the rows' scores (runs of rows sharing each K
// load), then the softmax step 16 rows at a time, then the values (runs of rows with the same
// number of causal positions, sharing each V load). Each row's operations are those of
// attention_tile.h, whichever rows share a run or a block. Not inlined: in the tile's chunk
// loop it left that loop's values spilled, and decode steps (a few rows, a few chunks) ran 4%
// slower.
template <class V, int C, typename K, typename T>
__attribute__((noinline)) void ChunkRows(const AttentionTileArgs& a, const TileRows& t, K k,
                                         const T* const* vp, int64_t c0) {
  constexpr int64_t hd = 16 * C;
  constexpr int64_t kRun = V::template kValueRows<C>;
  // Positions grow along the tile: the queries before `first` end before the chunk.
  int64_t first = 0;
  while (first < a.num_queries && a.pos[first] < c0) ++first;
  for (int64_t r = first * a.group; r < t.rows; r += kRun)
    ScoreRows<V, C>(std::min(kRun, t.rows - r), t.q + r * hd, k, a.scale, t.s + r);
  int64_t i = 0, g = 0;  // row b's query and head
  for (int64_t b = 0; b < t.rows; b += 16) {
    const int count = static_cast<int>(std::min<int64_t>(16, t.rows - b));
    int64_t n[16];
    for (int r = 0; r < count; ++r) {
      n[r] = Causal(a, i, c0);
      if (++g == a.group) g = 0, ++i;
    }
    SoftmaxRows16<V>(t.s + b, n, count, t.m + b, t.l + b, t.corr + b);
  }
  for (i = first; i < a.num_queries;) {
    const int64_t n = Causal(a, i, c0);
    int64_t end = i + 1;
    while (end < a.num_queries && Causal(a, end, c0) == n) ++end;
    for (int64_t r = i * a.group; r < end * a.group; r += kRun) {
      ValueRows<V, C, T>(std::min(kRun, end * a.group - r), vp, t.s + r, t.corr + r, n,
                         t.o + r * hd);
    }
    i = end;
  }
}

// Tiles of at most this many rows read fp16 or fp8 K/V rows directly, widening them in each use
// (a decode step's query: few rows share a chunk); larger ones widen each chunk once into a
// buffer.
constexpr int64_t kDirectRows = 4;
constexpr uint16_t kZeroHalves[128] = {};

// The chunk at c0 read directly from fp8 rows of element type E (fp8_x86.h); rows past `valid`
// read zeros.
template <class V, int C, typename E>
void DirectFp8Chunk(const AttentionTileArgs& a, const TileRows& t, const char* kbase,
                    const char* vbase, int64_t c0, int64_t valid) {
  static constexpr E kZero[16 * C] = {};
  const E* kr[kChunk];
  const E* vr[kChunk];
  for (int64_t j = 0; j < kChunk; ++j) {
    kr[j] = j < valid ? reinterpret_cast<const E*>(kbase + a.kv_rows[c0 + j]) : kZero;
    vr[j] = j < valid ? reinterpret_cast<const E*>(vbase + a.kv_rows[c0 + j]) : kZero;
  }
  ChunkRows<V, C>(a, t, KRows<E>{kr}, vr, c0);
}

template <class V, int C>
void AttentionTile(const AttentionTileArgs& a) {
  constexpr int64_t hd = 16 * C;
  static_assert(hd <= 128, "kZeroHalves");
  const PagedKvLayer& layer = *a.layer;
  const bool f16 = layer.dtype == KvDtype::kF16;
  const bool fp8 = IsFp8(layer.dtype);
  const int64_t row_bytes = hd * KvDtypeBytes(layer.dtype);
  const int64_t rows = a.num_queries * a.group;
  const bool widen = f16 && rows > kDirectRows;
  // Tiles with enough rows transpose each K chunk once for their scores (kbuf[d * 16 + j]).
  const bool transpose = V::kTransposeK && rows > kDirectRows;
  const int64_t rows16 = (rows + 15) / 16 * 16;
  float* kbuf = a.scratch;
  float* vbuf = kbuf + kChunk * hd;
  float* zero = vbuf + kChunk * hd;
  TileRows t;
  t.rows = rows;
  t.q = zero + hd;
  t.o = t.q + rows * hd;
  t.s = reinterpret_cast<float(*)[kChunk]>(t.o + rows * hd);
  t.m = t.o + rows * hd + rows16 * kChunk;
  t.l = t.m + rows16;
  t.corr = t.l + rows16;
  std::fill(zero, zero + hd, 0.0f);
  for (int64_t i = 0; i < a.num_queries; ++i)
    std::memcpy(t.q + i * a.group * hd, a.q + i * a.q_stride, a.group * hd * sizeof(float));
  std::fill(t.o, t.o + rows * hd, 0.0f);
  std::fill(t.m, t.m + rows16, -INFINITY);
  std::fill(t.l, t.l + rows16, 0.0f);

  int64_t ctx = 0;
  for (int64_t i = 0; i < a.num_queries; ++i) ctx = std::max<int64_t>(ctx, a.pos[i] + 1);
  const char* kbase = static_cast<const char*>(layer.k);
  const char* vbase = static_cast<const char*>(layer.v);
  for (int64_t p = 0; p < std::min(ctx, kPrefetchChunks * kChunk); ++p) {
    PrefetchRow(kbase, a.kv_rows[p], row_bytes);
    PrefetchRow(vbase, a.kv_rows[p], row_bytes);
  }
  const float* kp[kChunk];
  const float* vp[kChunk];
  const uint16_t* kh[kChunk];
  const uint16_t* vh[kChunk];
  for (int64_t c0 = 0; c0 < ctx; c0 += kChunk) {
    const int64_t valid = std::min(kChunk, ctx - c0);
    for (int64_t p = c0 + kPrefetchChunks * kChunk;
         p < std::min(ctx, (kPrefetchChunks + 1) * kChunk + c0); ++p) {
      PrefetchRow(kbase, a.kv_rows[p], row_bytes);
      PrefetchRow(vbase, a.kv_rows[p], row_bytes);
    }
    if (f16) {
      for (int64_t j = 0; j < kChunk; ++j) {
        kh[j] =
            j < valid ? reinterpret_cast<const uint16_t*>(kbase + a.kv_rows[c0 + j]) : kZeroHalves;
        vh[j] =
            j < valid ? reinterpret_cast<const uint16_t*>(vbase + a.kv_rows[c0 + j]) : kZeroHalves;
      }
      if (!widen) {
        ChunkRows<V, C>(a, t, KRows<uint16_t>{kh}, vh, c0);
        continue;
      }
      for (int64_t j = 0; j < kChunk; ++j) {
        for (int k = 0; k < C; ++k) {
          if (!transpose) V::HalvesToFloats(kh[j] + 16 * k, kbuf + j * hd + 16 * k);
          V::HalvesToFloats(vh[j] + 16 * k, vbuf + j * hd + 16 * k);
        }
        kp[j] = kbuf + j * hd;
        vp[j] = vbuf + j * hd;
      }
      if (transpose) V::template Transpose<C>(kh, kbuf);
    } else if (fp8 && rows <= kDirectRows) {
      if (layer.dtype == KvDtype::kFp8E4M3) {
        DirectFp8Chunk<V, C, Fp8E4M3Elem>(a, t, kbase, vbase, c0, valid);
      } else {
        DirectFp8Chunk<V, C, Fp8E5M2Elem>(a, t, kbase, vbase, c0, valid);
      }
      continue;
    } else if (fp8) {
      // Each chunk widened once: the K rows (through vbuf when they are transposed into kbuf),
      // then the V rows.
      const auto widen = [&](const char* base, float* dst, const float** rows) {
        for (int64_t j = 0; j < kChunk; ++j) {
          rows[j] = zero;
          if (j >= valid) continue;
          Fp8ToFloats(reinterpret_cast<const uint8_t*>(base + a.kv_rows[c0 + j]), hd, layer.dtype,
                      dst + j * hd, /*vector=*/true);
          rows[j] = dst + j * hd;
        }
      };
      widen(kbase, transpose ? vbuf : kbuf, kp);
      if (transpose) V::template Transpose<C>(kp, kbuf);
      widen(vbase, vbuf, vp);
    } else {
      for (int64_t j = 0; j < kChunk; ++j) {
        kp[j] = j < valid ? reinterpret_cast<const float*>(kbase + a.kv_rows[c0 + j]) : zero;
        vp[j] = j < valid ? reinterpret_cast<const float*>(vbase + a.kv_rows[c0 + j]) : zero;
      }
      if (transpose) V::template Transpose<C>(kp, kbuf);
    }
    if (transpose) {
      ChunkRows<V, C>(a, t, KTransposed{kbuf}, vp, c0);
    } else {
      ChunkRows<V, C>(a, t, KRows<float>{kp}, vp, c0);
    }
  }
  for (int64_t i = 0; i < a.num_queries; ++i) {
    for (int64_t g = 0; g < a.group; ++g) {
      const int64_t r = i * a.group + g;
      const auto inv = V::Set1(1.0f / t.l[r]);
      float* out = a.out + i * a.out_stride + g * hd;
      for (int k = 0; k < C; ++k)
        V::Store(out + 16 * k, V::Mul(V::Load(t.o + r * hd + 16 * k), inv));
    }
  }
}

// The kernel for head_dim, or null.
template <class V>
AttentionTileFn TileFor(int64_t head_dim) {
  switch (head_dim) {
    case 64:
      return AttentionTile<V, 4>;
    case 128:
      return AttentionTile<V, 8>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace pagellm::kernels::internal

#endif  // PAGELLM_KERNELS_CPU_ATTENTION_TILE_IMPL_H_
