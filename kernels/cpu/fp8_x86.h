// The CPU kernels' widening of fp8 cache elements (common/fp8.h) through F16C: every E5M2 value
// is an fp16's top byte, and every E4M3 value is an fp16 (its magnitude bits shifted left by 7
// under the sign) times 2^8. Exact; NaN codes widen to NaN.
// Thread-safe: pure functions.
#ifndef PAGELLM_KERNELS_CPU_FP8_X86_H_
#define PAGELLM_KERNELS_CPU_FP8_X86_H_

#include <immintrin.h>

#include <cstdint>

namespace pagellm::kernels::internal {

// An fp8 cache element by format, so that a kernel's Load picks the widening by overload.
struct Fp8E4M3Elem {
  uint8_t bits;
};
struct Fp8E5M2Elem {
  uint8_t bits;
};

// The codes in x's 16-bit lanes (zero-extended bytes) as fp16 bits: E5M2's value, or E4M3's
// value / 2^8 (the caller multiplies by 2^8).
__attribute__((target("avx2"))) inline __m128i Fp8ToHalfBits8(__m128i x, bool e4m3) {
  if (!e4m3) return _mm_slli_epi16(x, 8);
  const __m128i mag = _mm_and_si128(x, _mm_set1_epi16(0x7f));
  const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(x, _mm_set1_epi16(0x80)), 8),
                                 _mm_slli_epi16(mag, 7));
  return _mm_blendv_epi8(h, _mm_set1_epi16(0x7e00), _mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7f)));
}
__attribute__((target("avx2"))) inline __m256i Fp8ToHalfBits16(__m256i x, bool e4m3) {
  if (!e4m3) return _mm256_slli_epi16(x, 8);
  const __m256i mag = _mm256_and_si256(x, _mm256_set1_epi16(0x7f));
  const __m256i h =
      _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(x, _mm256_set1_epi16(0x80)), 8),
                      _mm256_slli_epi16(mag, 7));
  return _mm256_blendv_epi8(h, _mm256_set1_epi16(0x7e00),
                            _mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x7f)));
}

// 8 elements at p, widened.
__attribute__((target("avx2,f16c"))) inline __m256 Fp8Load8(const uint8_t* p, bool e4m3) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m256 f = _mm256_cvtph_ps(Fp8ToHalfBits8(_mm_cvtepu8_epi16(b), e4m3));
  return e4m3 ? _mm256_mul_ps(f, _mm256_set1_ps(256.0f)) : f;
}

// 16 elements at p, widened.
__attribute__((target("avx512f,avx512vl,f16c"))) inline __m512 Fp8Load16(const uint8_t* p,
                                                                         bool e4m3) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m512 f = _mm512_cvtph_ps(Fp8ToHalfBits16(_mm256_cvtepu8_epi16(b), e4m3));
  return e4m3 ? _mm512_mul_ps(f, _mm512_set1_ps(256.0f)) : f;
}

}  // namespace pagellm::kernels::internal

#endif  // PAGELLM_KERNELS_CPU_FP8_X86_H_
