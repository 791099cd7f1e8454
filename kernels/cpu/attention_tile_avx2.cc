// attention_tile.h's kernel with AVX2, FMA and F16C: 16 lanes as two 256-bit vectors (lanes 0-7
// and 8-15), as the other AVX2 kernels hold them.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/exp_x86.h"
#include "kernels/cpu/fp8_x86.h"

namespace pagellm::kernels::internal {
namespace {

struct V8x2 {
  struct R {
    __m256 lo, hi;
  };
  // Scores from K rows (V8x2::Scores). Transposed K (attention_tile_impl.h) measured no faster
  // with one row per run and 16 vector registers.
  static constexpr bool kTransposeK = false;
  template <int C>
  static constexpr int kValueRows = 1;  // 8 accumulators a row already fill the pipes

  static R Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static R Set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static R Load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static R Load(const uint16_t* h) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 8)))};
  }
  static R Load(const Fp8E4M3Elem* p) {
    return {Fp8Load8(reinterpret_cast<const uint8_t*>(p), /*e4m3=*/true),
            Fp8Load8(reinterpret_cast<const uint8_t*>(p) + 8, /*e4m3=*/true)};
  }
  static R Load(const Fp8E5M2Elem* p) {
    return {Fp8Load8(reinterpret_cast<const uint8_t*>(p), /*e4m3=*/false),
            Fp8Load8(reinterpret_cast<const uint8_t*>(p) + 8, /*e4m3=*/false)};
  }
  static void Store(float* p, R a) {
    _mm256_storeu_ps(p, a.lo);
    _mm256_storeu_ps(p + 8, a.hi);
  }
  static R Fma(R a, R b, R c) {
    return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
  }
  static R Pin(R a) { return a; }  // one row: each load folds into its one fma
  static R Add(R a, R b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static R Mul(R a, R b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static R Sub(R a, R b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
  static R Exp(R a) { return {ExpApprox8(a.lo), ExpApprox8(a.hi)}; }
  static R KeepFirst(R a, int64_t n, float fill) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i nv = _mm256_set1_epi32(static_cast<int32_t>(n));
    const __m256 f = _mm256_set1_ps(fill);
    const __m256 keep_lo = _mm256_castsi256_ps(_mm256_cmpgt_epi32(nv, lane));
    const __m256 keep_hi =
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(nv, _mm256_add_epi32(lane, _mm256_set1_epi32(8))));
    return {_mm256_blendv_ps(f, a.lo, keep_lo), _mm256_blendv_ps(f, a.hi, keep_hi)};
  }
  // a > b ? a : b, lane by lane (std::max(b, a)).
  static R Max(R a, R b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
  static R ZeroWhereNegInf(R m, R x) {
    const __m256 inf = _mm256_set1_ps(-INFINITY), zero = _mm256_setzero_ps();
    return {_mm256_blendv_ps(x.lo, zero, _mm256_cmp_ps(m.lo, inf, _CMP_EQ_OQ)),
            _mm256_blendv_ps(x.hi, zero, _mm256_cmp_ps(m.hi, inf, _CMP_EQ_OQ))};
  }
  static float MaxLanes(R a) {
    const __m256 m8 = _mm256_max_ps(a.lo, a.hi);
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  // Lane r: MaxLanes and SumLanes of rows[r] for r < count, 0 beyond.
  static int RowsRead(int count) { return count; }
  static R MaxRows(const float (*rows)[16], int count) {
    alignas(32) float out[16] = {};
    for (int r = 0; r < count; ++r) out[r] = MaxLanes(Load(rows[r]));
    return Load(out);
  }
  static R SumRows(const float (*rows)[16], int count) {
    alignas(32) float out[16] = {};
    for (int r = 0; r < count; ++r) out[r] = SumLanes(Load(rows[r]));
    return Load(out);
  }
  // ReduceLanes16's order: lanes i and i + 8 (lo + hi), then i and i + 4 (the 128-bit halves),
  // i and i + 2, i and i + 1.
  static __m128 Quarter(R a) {
    const __m256 r = _mm256_add_ps(a.lo, a.hi);
    return _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
  }
  static float SumLanes(R a) {
    const __m128 b = Quarter(a);
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
  }
  // Two rows' quarters b0, b1 to (c0, c1) of each: (b0[0] + b0[2], b0[1] + b0[3], b1[0] +
  // b1[2], b1[1] + b1[3]).
  static __m128 Halves(__m128 b0, __m128 b1) {
    return _mm_add_ps(_mm_shuffle_ps(b0, b1, _MM_SHUFFLE(1, 0, 1, 0)),
                      _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // The 16 positions' dot products two at a time, reduced in registers (the accumulators never
  // go through memory): four chains of fma in flight, then each pair's quarters and halves,
  // and every second pair the final sums of four positions.
  template <int C, int kRows, typename T>
  static void Scores(const R (*qr)[C], const T* const* k, R* out) {
    static_assert(kRows == 1);
    const R* q = qr[0];
    __m128 four[4];
#pragma GCC unroll 4
    for (int f = 0; f < 4; ++f) {
      __m128 h[2];
#pragma GCC unroll 2
      for (int pr = 0; pr < 2; ++pr) {
        const T* k0 = k[4 * f + 2 * pr];
        const T* k1 = k[4 * f + 2 * pr + 1];
        R a0 = Zero(), a1 = Zero();
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          a0 = Fma(q[c], Load(k0 + 16 * c), a0);
          a1 = Fma(q[c], Load(k1 + 16 * c), a1);
        }
        h[pr] = Halves(Quarter(a0), Quarter(a1));
      }
      four[f] = _mm_add_ps(_mm_shuffle_ps(h[0], h[1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm_shuffle_ps(h[0], h[1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
    out[0] = {_mm256_set_m128(four[1], four[0]), _mm256_set_m128(four[3], four[2])};
  }
  static void HalvesToFloats(const uint16_t* h, float* f) { Store(f, Load(h)); }
  template <int C, typename T>
  static void Transpose(const T* const*, float*) {}  // not called: kTransposeK is false
};

}  // namespace
}  // namespace pagellm::kernels::internal

#include "kernels/cpu/attention_tile_impl.h"

namespace pagellm::kernels::internal {
AttentionTileFn AttentionTileAvx2(int64_t head_dim) { return TileFor<V8x2>(head_dim); }
}  // namespace pagellm::kernels::internal
