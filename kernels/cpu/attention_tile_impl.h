// The tile kernel of attention_tile.h, written once over a 16-lane vector type V that each
// instruction-set file defines before including this (attention_tile_avx512.cc: one __m512;
// attention_tile_avx2.cc: two __m256). V provides, lane by lane and exactly as the scalar
// operations: Zero, Set1, Load/Store (16 floats), Fma(a, b, c) = a * b + c rounded once, Mul,
// Sub, Exp (ExpApprox), KeepFirst(a, n, fill) (lanes j >= n replaced by fill), First (lane 0),
// MaxLanes (the largest lane), SumLanes (ReduceLanes16's sum), Scores<C>(q, k) (lane j =
// ReduceLanes16 of the 16 lanes of fma over the C vectors of q and k[j], in order) and
// HalvesToFloats (16 fp16 to fp32).
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
      const typename V::R v = V::Load(vp[j] + 16 * k);
      for (int r = 0; r < kRows; ++r) acc[r][k] = V::Fma(pj[r], v, acc[r][k]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int k = 0; k < C; ++k) V::Store(o + r * hd + 16 * k, acc[r][k]);
  }
}

// One row's scores for the chunk and its online-softmax step (attention_tile.h's formulas):
// updates m and l, leaves the probabilities in p and the factor for o in *corr.
template <class V, int C, typename T>
inline void ScoreRow(const float* q, const T* const* kp, int64_t n, float scale, float* m, float* l,
                     float* p, float* corr) {
  typename V::R qv[C];
  for (int k = 0; k < C; ++k) qv[k] = V::Load(q + 16 * k);
  const auto s =
      V::KeepFirst(V::Mul(V::template Scores<C, T>(qv, kp), V::Set1(scale)), n, -INFINITY);
  const float m_new = std::max(*m, V::MaxLanes(s));
  *corr = *m == -INFINITY ? 0.0f : V::First(V::Exp(V::Set1(*m - m_new)));
  const auto e = V::KeepFirst(V::Exp(V::Sub(s, V::Set1(m_new))), n, 0.0f);
  V::Store(p, e);
  *l = *l * *corr + V::SumLanes(e);
  *m = m_new;
}

// The chunk at c0 for every row of the tile, with its K and V rows at kp[j], vp[j] (fp32, or
// fp16 widened as they are read).
template <class V, int C, typename T>
void ChunkRows(const AttentionTileArgs& a, const T* const* kp, const T* const* vp, int64_t c0,
               float* o, float* m, float* l) {
  constexpr int64_t hd = 16 * C;
  alignas(64) float prob[V::kValueRows][kChunk];
  float corr[V::kValueRows];
  for (int64_t i = 0; i < a.num_queries; ++i) {
    const int64_t n = std::min<int64_t>(kChunk, a.pos[i] + 1 - c0);
    if (n <= 0) continue;
    const float* qi = a.q + i * a.q_stride;
    // The query's heads in runs of up to V::kValueRows, which then share the value loads.
    for (int64_t g0 = 0; g0 < a.group; g0 += V::kValueRows) {
      const int64_t run = std::min<int64_t>(V::kValueRows, a.group - g0);
      const int64_t r0 = i * a.group + g0;
      for (int64_t g = 0; g < run; ++g) {
        ScoreRow<V, C, T>(qi + (g0 + g) * hd, kp, n, a.scale, m + r0 + g, l + r0 + g, prob[g],
                          corr + g);
      }
      float* orow = o + r0 * hd;
      if (run == 2) {
        AccumulateValues<V, C, 2, T>(vp, prob, corr, n, orow, hd);
      } else {
        for (int64_t g = 0; g < run; ++g) {
          AccumulateValues<V, C, 1, T>(vp, prob + g, corr + g, n, orow + g * hd, hd);
        }
      }
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
        ChunkRows<V, C, uint16_t>(a, kh, vh, c0, o, m, l);
        continue;
      }
      for (int64_t j = 0; j < kChunk; ++j) {
        for (int k = 0; k < C; ++k) {
          V::HalvesToFloats(kh[j] + 16 * k, kbuf + j * hd + 16 * k);
          V::HalvesToFloats(vh[j] + 16 * k, vbuf + j * hd + 16 * k);
        }
        kp[j] = kbuf + j * hd;
        vp[j] = vbuf + j * hd;
      }
    } else {
      for (int64_t j = 0; j < kChunk; ++j) {
        kp[j] = j < valid ? reinterpret_cast<const float*>(kbase + a.kv_rows[c0 + j]) : zero;
        vp[j] = j < valid ? reinterpret_cast<const float*>(vbase + a.kv_rows[c0 + j]) : zero;
      }
    }
    ChunkRows<V, C, float>(a, kp, vp, c0, o, m, l);
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
