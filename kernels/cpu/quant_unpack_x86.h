// The packed group-blocks of quant_layout.h unpacked into 256-bit vectors, shared by the x86
// kernels (quant_matmul_avx512.cc, quant_matmul_avx2.cc). Uses AVX2 and F16C only.
//
// Each kernel file compiles this with its own target flags, so the functions sit in an unnamed
// namespace: every including file gets its own copy (one shared inline definition could be the
// AVX-512-compiled one, and fault on a CPU without AVX-512).
#ifndef PAGELLM_KERNELS_CPU_QUANT_UNPACK_X86_H_
#define PAGELLM_KERNELS_CPU_QUANT_UNPACK_X86_H_

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/quant_layout.h"
#include "kernels/cpu/quant_matmul.h"

namespace pagellm::kernels::internal {
namespace {  // NOLINT(build/namespaces_headers): see the file comment

// One group-block unpacked for 8 rows: quant vectors, fp32 scale (and min), and for kHalves the
// halves' int32 scales.
struct Unpacked {
  __m256i wv[8];
  __m256 dw, mw;
  __m256i sc_lo, sc_hi;
};

template <GgmlType T>
inline void Unpack(const PackedQuantMatrix& w, int64_t g, int64_t b, int64_t nb, Unpacked* o) {
  constexpr PackedLayout L = LayoutOf(T);
  const uint8_t* gb = w.data.data() + (g * nb + b) * w.block_bytes;
  const uint8_t* q = gb + L.scale_bytes;
  auto load = [](const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  };
  if constexpr (L.bits == 8) {
    for (int t = 0; t < 8; ++t) o->wv[t] = load(q + 32 * t);
  } else {
    const __m256i low = _mm256_set1_epi8(0x0F);
    for (int t = 0; t < 4; ++t) {
      const __m256i p = load(q + 32 * t);
      o->wv[t] = _mm256_and_si256(p, low);
      o->wv[t + 4] = _mm256_and_si256(_mm256_srli_epi16(p, 4), low);
    }
  }
  if constexpr (L.bits == 5) {  // bit t of the plane -> bit 4 of vector t
    const __m256i h = load(q + 128), bit4 = _mm256_set1_epi8(0x10);
    o->wv[0] = _mm256_or_si256(o->wv[0], _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4));
    o->wv[1] = _mm256_or_si256(o->wv[1], _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4));
    o->wv[2] = _mm256_or_si256(o->wv[2], _mm256_and_si256(_mm256_slli_epi16(h, 2), bit4));
    o->wv[3] = _mm256_or_si256(o->wv[3], _mm256_and_si256(_mm256_slli_epi16(h, 1), bit4));
    o->wv[4] = _mm256_or_si256(o->wv[4], _mm256_and_si256(h, bit4));
    o->wv[5] = _mm256_or_si256(o->wv[5], _mm256_and_si256(_mm256_srli_epi16(h, 1), bit4));
    o->wv[6] = _mm256_or_si256(o->wv[6], _mm256_and_si256(_mm256_srli_epi16(h, 2), bit4));
    o->wv[7] = _mm256_or_si256(o->wv[7], _mm256_and_si256(_mm256_srli_epi16(h, 3), bit4));
  }
  if constexpr (L.bits == 6) {  // bits 2s..2s+1 of plane k -> bits 4..5 of vector 4k+s
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    for (int k = 0; k < 2; ++k) {
      const __m256i h = load(q + 128 + 32 * k);
      __m256i* v = o->wv + 4 * k;
      v[0] = _mm256_or_si256(v[0], _mm256_and_si256(_mm256_slli_epi16(h, 4), bits45));
      v[1] = _mm256_or_si256(v[1], _mm256_and_si256(_mm256_slli_epi16(h, 2), bits45));
      v[2] = _mm256_or_si256(v[2], _mm256_and_si256(h, bits45));
      v[3] = _mm256_or_si256(v[3], _mm256_and_si256(_mm256_srli_epi16(h, 2), bits45));
    }
  }
  auto f16x8 = [](const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  };
  auto u8x8 = [](const uint8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  };
  const float* sup = L.super_floats > 0 ? SuperOf(w.super.data(), L, g, b, nb) : nullptr;
  if constexpr (L.scale == Scale::kF16 || L.scale == Scale::kF16Min) o->dw = f16x8(gb);
  if constexpr (L.scale == Scale::kF16Min) o->mw = f16x8(gb + 16);
  if constexpr (L.scale == Scale::kSubK) {
    o->dw = _mm256_mul_ps(_mm256_loadu_ps(sup), u8x8(gb));
    o->mw = _mm256_mul_ps(_mm256_loadu_ps(sup + 8), u8x8(gb + 8));
  }
  if constexpr (L.scale == Scale::kHalves || L.scale == Scale::kSuper) o->dw = _mm256_loadu_ps(sup);
  if constexpr (L.scale == Scale::kHalves) {
    o->sc_lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(gb)));
    o->sc_hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(gb + 8)));
  }
}

// Calls fn(std::integral_constant<GgmlType, T>{}) for the packed type t (a kernel's dispatch
// from the run-time type to its template); nothing for a type PackQuantMatrix does not make.
template <typename Fn>
inline void ForPackedType(GgmlType t, Fn&& fn) {
  using G = GgmlType;
  switch (t) {
    case G::kQ4_0:
      return fn(std::integral_constant<G, G::kQ4_0>{});
    case G::kQ4_1:
      return fn(std::integral_constant<G, G::kQ4_1>{});
    case G::kQ5_0:
      return fn(std::integral_constant<G, G::kQ5_0>{});
    case G::kQ5_1:
      return fn(std::integral_constant<G, G::kQ5_1>{});
    case G::kQ8_0:
      return fn(std::integral_constant<G, G::kQ8_0>{});
    case G::kQ4_K:
      return fn(std::integral_constant<G, G::kQ4_K>{});
    case G::kQ5_K:
      return fn(std::integral_constant<G, G::kQ5_K>{});
    case G::kQ6_K:
      return fn(std::integral_constant<G, G::kQ6_K>{});
    case G::kQ8_K:
      return fn(std::integral_constant<G, G::kQ8_K>{});
    default:
      return;
  }
}

}  // namespace
}  // namespace pagellm::kernels::internal

#endif  // PAGELLM_KERNELS_CPU_QUANT_UNPACK_X86_H_
