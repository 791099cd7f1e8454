// AVX-512 VNNI kernel (256-bit vectors, AVX512VL) for QuantMatmul. Register tile: up to 4
// output rows x 4 activation rows. Bit-identical to the portable kernel: see quant_matmul.cc.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/quant_matmul.h"

namespace pagellm::kernels::internal {
namespace {

constexpr int64_t kBlock = 32;

template <GgmlType T>
struct Fmt;
template <>
struct Fmt<GgmlType::kQ4_0> {
  static constexpr int64_t kBytes = 18;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false;
};
template <>
struct Fmt<GgmlType::kQ4_1> {
  static constexpr int64_t kBytes = 20;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
};
template <>
struct Fmt<GgmlType::kQ8_0> {
  static constexpr int64_t kBytes = 34;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false;
};

inline float LoadHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

template <GgmlType T>
inline __m256i Unpack(const uint8_t* blk) {
  if constexpr (T == GgmlType::kQ8_0) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    return _mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + (Fmt<T>::kMin ? 4 : 2)));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(v, mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  }
}

template <GgmlType T, int MT, int NT>
void Tile(const uint8_t* w, int64_t row_bytes, int64_t n0, const QuantizedActivations& x,
          int64_t m0, float* y, int64_t ldy) {
  using F = Fmt<T>;
  const int64_t nb = x.cols / kBlock;
  __m256 acc[MT][NT];
  float macc[MT][NT];
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NT; ++j) {
      acc[i][j] = _mm256_setzero_ps();
      macc[i][j] = 0.0f;
    }
  const __m256i neg_offset = _mm256_set1_epi32(-F::kOffset);
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wv[NT];
    __m256 dw[NT];
    float mw[NT];
    for (int j = 0; j < NT; ++j) {
      const uint8_t* blk = w + (n0 + j) * row_bytes + b * F::kBytes;
      wv[j] = Unpack<T>(blk);
      dw[j] = _mm256_set1_ps(LoadHalf(blk));
      if constexpr (F::kMin) mw[j] = LoadHalf(blk + 2);
    }
    for (int i = 0; i < MT; ++i) {
      const int64_t m = m0 + i;
      const __m256i xq =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs.data() + m * x.cols + b * kBlock));
      __m256i init;
      if constexpr (F::kOffset != 0) {
        init = _mm256_mullo_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.lanesum.data() + (m * nb + b) * 8)),
            neg_offset);
      } else {
        init = _mm256_setzero_si256();
      }
      const __m256 dx = _mm256_set1_ps(x.d[m * nb + b]);
      for (int j = 0; j < NT; ++j) {
        const __m256i dot = _mm256_dpbusd_epi32(init, wv[j], xq);
        acc[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(dot), dw[j]), dx, acc[i][j]);
        if constexpr (F::kMin) macc[i][j] = __builtin_fmaf(mw[j], x.s[m * nb + b], macc[i][j]);
      }
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NT; ++j) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[i][j]);
      y[(m0 + i) * ldy + n0 + j] = ReduceLanes8(lanes) + macc[i][j];
    }
}

template <GgmlType T, int NT>
void Rows(const uint8_t* w, int64_t row_bytes, int64_t n0, const QuantizedActivations& x,
          float* y, int64_t ldy) {
  int64_t m = 0;
  for (; m + 4 <= x.rows; m += 4) Tile<T, 4, NT>(w, row_bytes, n0, x, m, y, ldy);
  switch (x.rows - m) {
    case 3: Tile<T, 3, NT>(w, row_bytes, n0, x, m, y, ldy); break;
    case 2: Tile<T, 2, NT>(w, row_bytes, n0, x, m, y, ldy); break;
    case 1: Tile<T, 1, NT>(w, row_bytes, n0, x, m, y, ldy); break;
    default: break;
  }
}

template <GgmlType T>
void Range(const uint8_t* w, int64_t n_begin, int64_t n_end, const QuantizedActivations& x,
           float* y, int64_t ldy) {
  const int64_t row_bytes = x.cols / kBlock * Fmt<T>::kBytes;
  int64_t n = n_begin;
  for (; n + 4 <= n_end; n += 4) Rows<T, 4>(w, row_bytes, n, x, y, ldy);
  for (; n < n_end; ++n) Rows<T, 1>(w, row_bytes, n, x, y, ldy);
}

}  // namespace

void QuantMatmulRangeAvx512(GgmlType type, const uint8_t* w, int64_t n_begin, int64_t n_end,
                            const QuantizedActivations& x, float* y, int64_t ldy) {
  switch (type) {
    case GgmlType::kQ4_0: return Range<GgmlType::kQ4_0>(w, n_begin, n_end, x, y, ldy);
    case GgmlType::kQ4_1: return Range<GgmlType::kQ4_1>(w, n_begin, n_end, x, y, ldy);
    default: return Range<GgmlType::kQ8_0>(w, n_begin, n_end, x, y, ldy);
  }
}

}  // namespace pagellm::kernels::internal
