// The tile kernel of attention_tile.h, written once over a 16-lane vector type V that each
// instruction-set file defines before including this (attention_tile_avx512.cc: one __m512;
// attention_tile_avx2.cc: two __m256). V provides, lane by lane and exactly as the scalar
// operations: Zero, Set1, Load/Store (16 floats), Fma(a, b, c) = a * b + c rounded once, Add,
// Mul, Sub, Exp (ExpApprox), KeepFirst(a, n, fill) (lanes j >= n replaced by fill), MaxLanes
// (the largest lane), SumLanes (ReduceLanes16's sum), Scores<C, kRows>(q, k, out) (row r's lane
// j = ReduceLanes16 of the 16 lanes of fma over the C vectors of q[r] and k[j], in order),
// HalvesToFloats (16 fp16 to fp32) and Pin (its argument, kept in a register). And:
//   - kValueRows<C>: how many rows of one query run together, sharing each K and V load;
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
#include "kernels/cpu/ops.h"

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

// The online-softmax step (attention_tile.h's formulas) of kRows rows of one query (they share
// n) given their raw scores s: updates m and l, leaves the probabilities in p and the factors
// for o in corr.
template <class V, int kRows>
inline void SoftmaxStep(typename V::R* s, int64_t n, float scale, float* m, float* l,
                        float (*p)[kChunk], float* corr) {
  alignas(64) float shift[16] = {};
  float m_new[kRows];
  for (int r = 0; r < kRows; ++r) {
    s[r] = V::KeepFirst(V::Mul(s[r], V::Set1(scale)), n, -INFINITY);
    m_new[r] = std::max(m[r], V::MaxLanes(s[r]));
    shift[r] = m[r] - m_new[r];
  }
  // One exponential for all the rows' factors: lane r is ExpApprox(m - m') of row r.
  alignas(64) float factor[16];
  V::Store(factor, V::Exp(V::Load(shift)));
  for (int r = 0; r < kRows; ++r) {
    corr[r] = m[r] == -INFINITY ? 0.0f : factor[r];
    const auto e = V::KeepFirst(V::Exp(V::Sub(s[r], V::Set1(m_new[r]))), n, 0.0f);
    V::Store(p[r], e);
    l[r] = l[r] * corr[r] + V::SumLanes(e);
    m[r] = m_new[r];
  }
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

// A run of `run` (1 .. kRows) rows of one query through the chunk: scores, softmax step and
// values, with the rows sharing each K and V load.
template <class V, int C, typename K, typename T, int kRows = V::template kValueRows<C>>
inline void RunRows(int64_t run, const float* q, K k, const T* const* vp, int64_t n, float scale,
                    float* m, float* l, float (*prob)[kChunk], float* corr, float* o) {
  constexpr int64_t hd = 16 * C;
  if constexpr (kRows > 1) {
    if (run < kRows) {
      RunRows<V, C, K, T, kRows - 1>(run, q, k, vp, n, scale, m, l, prob, corr, o);
      return;
    }
  }
  typename V::R s[kRows];
  RowScores<V, C, kRows>(q, hd, k, s);
  SoftmaxStep<V, kRows>(s, n, scale, m, l, prob, corr);
  AccumulateValues<V, C, kRows, T>(vp, prob, corr, n, o, hd);
}

// The chunk at c0 for every row of the tile, with its K and V rows at kp[j], vp[j] (fp32, or
// fp16 widened as they are read).
template <class V, int C, typename K, typename T>
inline void ChunkRows(const AttentionTileArgs& a, K k, const T* const* vp, int64_t c0, float* o,
                      float* m, float* l) {
  constexpr int64_t hd = 16 * C;
  constexpr int64_t kRun = V::template kValueRows<C>;
  alignas(64) float prob[kRun][kChunk];
  float corr[kRun];
  for (int64_t i = 0; i < a.num_queries; ++i) {
    const int64_t n = std::min<int64_t>(kChunk, a.pos[i] + 1 - c0);
    if (n <= 0) continue;
    const float* qi = a.q + i * a.q_stride;
    // The query's heads in runs of up to kRun, which then share the K and V loads.
    for (int64_t g0 = 0; g0 < a.group; g0 += kRun) {
      const int64_t run = std::min<int64_t>(kRun, a.group - g0);
      const int64_t r0 = i * a.group + g0;
      float* orow = o + r0 * hd;
      RunRows<V, C, K, T>(run, qi + g0 * hd, k, vp, n, a.scale, m + r0, l + r0, prob, corr, orow);
    }
  }
}

// Tiles of at most this many rows read fp16 K/V rows directly, widening them in each use (a
// decode step's query: few rows share a chunk); larger ones widen each chunk once into a buffer.
constexpr int64_t kDirectRows = 4;
constexpr uint16_t kZeroHalves[128] = {};

template <class V, int C>
void AttentionTile(const AttentionTileArgs& a) {
  constexpr int64_t hd = 16 * C;
  static_assert(hd <= 128, "kZeroHalves");
  const PagedKvLayer& layer = *a.layer;
  const bool f16 = layer.dtype == KvDtype::kF16;
  const int64_t row_bytes = hd * KvDtypeBytes(layer.dtype);
  const int64_t rows = a.num_queries * a.group;
  const bool widen = f16 && rows > kDirectRows;
  // Tiles with enough rows transpose each K chunk once for their scores (kbuf[d * 16 + j]).
  const bool transpose = V::kTransposeK && rows > kDirectRows;
  float* kbuf = a.scratch;
  float* vbuf = kbuf + kChunk * hd;
  float* zero = vbuf + kChunk * hd;
  float* o = zero + hd;
  float* m = o + rows * hd;
  float* l = m + rows;
  std::fill(zero, zero + hd, 0.0f);
  std::fill(o, o + rows * hd, 0.0f);
  std::fill(m, m + rows, -INFINITY);
  std::fill(l, l + rows, 0.0f);

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
        ChunkRows<V, C>(a, KRows<uint16_t>{kh}, vh, c0, o, m, l);
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
    } else {
      for (int64_t j = 0; j < kChunk; ++j) {
        kp[j] = j < valid ? reinterpret_cast<const float*>(kbase + a.kv_rows[c0 + j]) : zero;
        vp[j] = j < valid ? reinterpret_cast<const float*>(vbase + a.kv_rows[c0 + j]) : zero;
      }
      if (transpose) V::template Transpose<C>(kp, kbuf);
    }
    if (transpose) {
      ChunkRows<V, C>(a, KTransposed{kbuf}, vp, c0, o, m, l);
    } else {
      ChunkRows<V, C>(a, KRows<float>{kp}, vp, c0, o, m, l);
    }
  }
  for (int64_t i = 0; i < a.num_queries; ++i) {
    for (int64_t g = 0; g < a.group; ++g) {
      const int64_t r = i * a.group + g;
      const auto inv = V::Set1(1.0f / l[r]);
      float* out = a.out + i * a.out_stride + g * hd;
      for (int k = 0; k < C; ++k) V::Store(out + 16 * k, V::Mul(V::Load(o + r * hd + 16 * k), inv));
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
