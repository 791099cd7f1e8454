// AVX-512 VNNI kernel for QuantMatmul over packed groups of 8 rows (256-bit vectors, AVX512VL;
// for more than two activation rows, pairs of groups in 512-bit vectors).
// Per group-block: the 8 rows' quants are unpacked once into 8 vectors; each activation row
// then needs 8 broadcasts and 8 dpbusd (two chains, summed exactly), one cvt, one mul and one
// fma (+ one fma for Q4_1's min) to advance all 8 rows' accumulators. Bit-identical to the
// portable kernel: the int32 dot products are exact and the fp32 operations are the same.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/quant_matmul.h"

namespace pagellm::kernels::internal {
namespace {

constexpr int64_t kBlock = 32;

template <GgmlType T>
struct Fmt {
  static constexpr bool kMin = T == GgmlType::kQ4_1;
  static constexpr bool kNibbles = T != GgmlType::kQ8_0;
  static constexpr int kOffset = T == GgmlType::kQ4_0 ? 8 : T == GgmlType::kQ8_0 ? 128 : 0;
  static constexpr int64_t kScaleBytes = kMin ? 32 : 16;
};

inline __m256i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

template <GgmlType T, int MT, int NG>
void Tile(const PackedQuantMatrix& w, int64_t g0, const QuantizedActivations& x, int64_t m0,
          float* y, int64_t ldy) {
  using F = Fmt<T>;
  const int64_t nb = x.cols / kBlock;
  __m256 acc[NG][MT];
  for (int g = 0; g < NG; ++g)
    for (int i = 0; i < MT; ++i) acc[g][i] = _mm256_setzero_ps();
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    for (int g = 0; g < NG; ++g) {
      const uint8_t* gb = w.data.data() + ((g0 + g) * nb + b) * w.block_bytes;
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb)));
      __m256 mw;
      if constexpr (F::kMin)
        mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 16)));
      const uint8_t* q = gb + F::kScaleBytes;
      __m256i wv[8];
      if constexpr (F::kNibbles) {
        for (int t = 0; t < 4; ++t) {
          const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * t));
          wv[t] = _mm256_and_si256(p, low);
          wv[t + 4] = _mm256_and_si256(_mm256_srli_epi16(p, 4), low);
        }
      } else {
        for (int t = 0; t < 8; ++t)
          wv[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * t));
      }
      for (int i = 0; i < MT; ++i) {
        const int64_t xb = (m0 + i) * nb + b;
        const int8_t* xq = x.qs.data() + (m0 + i) * x.cols + b * kBlock;
        __m256i d0 =
            F::kOffset != 0 ? _mm256_set1_epi32(-F::kOffset * x.sumq[xb]) : _mm256_setzero_si256();
        __m256i d1 = _mm256_setzero_si256();
        for (int t = 0; t < 8; t += 2) {
          d0 = _mm256_dpbusd_epi32(d0, wv[t], Broadcast4(xq + 4 * t));
          d1 = _mm256_dpbusd_epi32(d1, wv[t + 1], Broadcast4(xq + 4 * t + 4));
        }
        const __m256 dot = _mm256_cvtepi32_ps(_mm256_add_epi32(d0, d1));
        acc[g][i] = _mm256_fmadd_ps(_mm256_mul_ps(dot, dw), _mm256_set1_ps(x.d[xb]), acc[g][i]);
        if constexpr (F::kMin) acc[g][i] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x.s[xb]), acc[g][i]);
      }
    }
  }
  for (int g = 0; g < NG; ++g) {
    const int64_t n0 = (g0 + g) * 8;
    const int64_t valid = std::min<int64_t>(8, w.n_out - n0);
    const __mmask8 mask = static_cast<__mmask8>((1u << valid) - 1);
    for (int i = 0; i < MT; ++i) _mm256_mask_storeu_ps(y + (m0 + i) * ldy + n0, mask, acc[g][i]);
  }
}

// Two adjacent groups (16 rows) in 512-bit vectors: every activation broadcast feeds 16 rows'
// dot products, half the instructions per multiply-add of Tile (whose issue rate, not the VNNI
// units, limits it). Per output the operations are Tile's.
template <GgmlType T, int MT>
void TilePair(const PackedQuantMatrix& w, int64_t g0, const QuantizedActivations& x, int64_t m0,
              float* y, int64_t ldy) {
  using F = Fmt<T>;
  const int64_t nb = x.cols / kBlock;
  __m512 acc[MT];
  for (int i = 0; i < MT; ++i) acc[i] = _mm512_setzero_ps();
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* ga = w.data.data() + (g0 * nb + b) * w.block_bytes;
    const uint8_t* gb = w.data.data() + ((g0 + 1) * nb + b) * w.block_bytes;
    auto halves = [](const uint8_t* lo, const uint8_t* hi) {
      return _mm512_cvtph_ps(_mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)), 1));
    };
    const __m512 dw = halves(ga, gb);
    __m512 mw;
    if constexpr (F::kMin) mw = halves(ga + 16, gb + 16);
    const uint8_t* qa = ga + F::kScaleBytes;
    const uint8_t* qb = gb + F::kScaleBytes;
    __m512i wv[8];
    auto load = [](const uint8_t* p) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    };
    auto pair = [](__m256i lo, __m256i hi) {
      return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    };
    if constexpr (F::kNibbles) {
      for (int t = 0; t < 4; ++t) {
        const __m256i a = load(qa + 32 * t), c = load(qb + 32 * t);
        wv[t] = pair(_mm256_and_si256(a, low), _mm256_and_si256(c, low));
        wv[t + 4] = pair(_mm256_and_si256(_mm256_srli_epi16(a, 4), low),
                         _mm256_and_si256(_mm256_srli_epi16(c, 4), low));
      }
    } else {
      for (int t = 0; t < 8; ++t) wv[t] = pair(load(qa + 32 * t), load(qb + 32 * t));
    }
    for (int i = 0; i < MT; ++i) {
      const int64_t xb = (m0 + i) * nb + b;
      const int8_t* xq = x.qs.data() + (m0 + i) * x.cols + b * kBlock;
      auto bcast = [](const int8_t* p) {
        int32_t v;
        std::memcpy(&v, p, 4);
        return _mm512_set1_epi32(v);
      };
      __m512i d0 =
          F::kOffset != 0 ? _mm512_set1_epi32(-F::kOffset * x.sumq[xb]) : _mm512_setzero_si512();
      __m512i d1 = _mm512_setzero_si512();
      for (int t = 0; t < 8; t += 2) {
        d0 = _mm512_dpbusd_epi32(d0, wv[t], bcast(xq + 4 * t));
        d1 = _mm512_dpbusd_epi32(d1, wv[t + 1], bcast(xq + 4 * t + 4));
      }
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(d0, d1));
      acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dot, dw), _mm512_set1_ps(x.d[xb]), acc[i]);
      if constexpr (F::kMin) acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x.s[xb]), acc[i]);
    }
  }
  const int64_t n0 = g0 * 8;
  const int64_t valid = std::min<int64_t>(16, w.n_out - n0);
  const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
  for (int i = 0; i < MT; ++i) _mm512_mask_storeu_ps(y + (m0 + i) * ldy + n0, mask, acc[i]);
}

template <GgmlType T>
void RowsPair(const PackedQuantMatrix& w, int64_t g0, const QuantizedActivations& x,
              int64_t m_begin, int64_t m_end, float* y, int64_t ldy) {
  int64_t m = m_begin;
  for (; m + 4 <= m_end; m += 4) TilePair<T, 4>(w, g0, x, m, y, ldy);
  switch (m_end - m) {
    case 3:
      TilePair<T, 3>(w, g0, x, m, y, ldy);
      break;
    case 2:
      TilePair<T, 2>(w, g0, x, m, y, ldy);
      break;
    case 1:
      TilePair<T, 1>(w, g0, x, m, y, ldy);
      break;
    default:
      break;
  }
}

template <GgmlType T, int NG>
void Rows(const PackedQuantMatrix& w, int64_t g0, const QuantizedActivations& x, int64_t m_begin,
          int64_t m_end, float* y, int64_t ldy) {
  int64_t m = m_begin;
  for (; m + 4 <= m_end; m += 4) Tile<T, 4, NG>(w, g0, x, m, y, ldy);
  switch (m_end - m) {
    case 3:
      Tile<T, 3, NG>(w, g0, x, m, y, ldy);
      break;
    case 2:
      Tile<T, 2, NG>(w, g0, x, m, y, ldy);
      break;
    case 1:
      Tile<T, 1, NG>(w, g0, x, m, y, ldy);
      break;
    default:
      break;
  }
}

template <GgmlType T>
void Groups(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
            const QuantizedActivations& x, float* y, int64_t ldy) {
  if (x.rows <= 2) {
    // Decode: few activation rows; several groups in flight for instruction-level parallelism.
    int64_t g = g_begin;
    for (; g + 4 <= g_end; g += 4) Rows<T, 4>(w, g, x, 0, x.rows, y, ldy);
    for (; g < g_end; ++g) Rows<T, 1>(w, g, x, 0, x.rows, y, ldy);
    return;
  }
  // Activation rows in chunks that stay in L1 while this thread's weight groups stream past.
  const int64_t chunk = std::max<int64_t>(4, (16384 / x.cols) / 4 * 4);
  for (int64_t m0 = 0; m0 < x.rows; m0 += chunk) {
    const int64_t m1 = std::min(x.rows, m0 + chunk);
    int64_t g = g_begin;
    for (; g + 2 <= g_end; g += 2) RowsPair<T>(w, g, x, m0, m1, y, ldy);
    if (g < g_end) Rows<T, 1>(w, g, x, m0, m1, y, ldy);
  }
}

}  // namespace

void QuantMatmulGroupsAvx512(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
                             const QuantizedActivations& x, float* y, int64_t ldy) {
  switch (w.type) {
    case GgmlType::kQ4_0:
      return Groups<GgmlType::kQ4_0>(w, g_begin, g_end, x, y, ldy);
    case GgmlType::kQ4_1:
      return Groups<GgmlType::kQ4_1>(w, g_begin, g_end, x, y, ldy);
    default:
      return Groups<GgmlType::kQ8_0>(w, g_begin, g_end, x, y, ldy);
  }
}

}  // namespace pagellm::kernels::internal
