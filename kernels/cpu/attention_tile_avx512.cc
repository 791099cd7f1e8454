// attention_tile.h's kernel with AVX-512: 16 lanes in one 512-bit vector.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/exp_x86.h"

// GCC 12 reports its own _mm512_cvtph_ps as maybe-uninitialized when inlined into arrays (a
// false positive; the same pragma stood around the AVX-512 attention task before).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pagellm::kernels::internal {
namespace {

struct V16 {
  using R = __m512;
  static constexpr int64_t kValueRows = 2;  // two rows' accumulators fill the two FMA pipes

  static R Zero() { return _mm512_setzero_ps(); }
  static R Set1(float x) { return _mm512_set1_ps(x); }
  static R Load(const float* p) { return _mm512_loadu_ps(p); }
  static R Load(const uint16_t* h) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
  }
  static void Store(float* p, R a) { _mm512_storeu_ps(p, a); }
  static R Fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R Mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R Sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R Exp(R a) { return ExpApprox16(a); }
  static R KeepFirst(R a, int64_t n, float fill) {
    const auto keep = static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1);
    return _mm512_mask_blend_ps(keep, _mm512_set1_ps(fill), a);
  }
  static float MaxLanes(R a) { return _mm512_reduce_max_ps(a); }
  static float First(R a) { return _mm512_cvtss_f32(a); }
  // ReduceLanes16's order: lanes i and i + 8, then 4, 2 and 1 apart.
  static float SumLanes(R a) {
    const __m256 r =
        _mm256_add_ps(_mm512_castps512_ps256(a),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
  }
  // Lane j: ReduceLanes16 of the fma lanes of q and k[j] (through memory, then the butterfly).
  template <int C, typename T>
  static R Scores(const R* q, const T* const* k) {
    alignas(64) float acc[16][16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      R s = Zero();
      for (int c = 0; c < C; ++c) s = Fma(q[c], Load(k[j] + 16 * c), s);
      Store(acc[j], s);
    }
    return ReduceRows16(acc);
  }
  // ReduceLanes16 of 16 rows at once: the same additions in the same pairs (lanes i and i + 8,
  // then 4, 2, 1 apart), as a butterfly across the rows that leaves row j's sum in lane j.
  static R ReduceRows16(const float (*rows)[16]) {
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
  static void HalvesToFloats(const uint16_t* h, float* f) { Store(f, Load(h)); }
};

}  // namespace
}  // namespace pagellm::kernels::internal

#include "kernels/cpu/attention_tile_impl.h"

namespace pagellm::kernels::internal {
AttentionTileFn AttentionTileAvx512(int64_t head_dim) { return TileFor<V16>(head_dim); }
}  // namespace pagellm::kernels::internal

#pragma GCC diagnostic pop
