// attention_tile.h's kernel with AVX-512: 16 lanes in one 512-bit vector.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/exp_x86.h"
#include "kernels/cpu/fp8_x86.h"

// GCC 12 reports the undefined vectors inside its own intrinsics (_mm512_cvtph_ps,
// _mm512_extractf64x4_pd) as uninitialized when they are inlined into arrays of rows (a false
// positive; the same pragma stood around the AVX-512 attention task before).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace pagellm::kernels::internal {
namespace {

struct V16 {
  using R = __m512;
  // Consecutive rows (a query's heads, or several queries') share each K and V load, and three
  // rows' fma chains fill the two FMA pipes (four measured no faster).
  static constexpr bool kTransposeK = true;
  template <int C>
  static constexpr int kValueRows = C <= 4 ? 3 : 2;

  static R Zero() { return _mm512_setzero_ps(); }
  static R Set1(float x) { return _mm512_set1_ps(x); }
  static R Load(const float* p) { return _mm512_loadu_ps(p); }
  static R Load(const uint16_t* h) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
  }
  static R Load(const Fp8E4M3Elem* p) {
    return Fp8Load16(reinterpret_cast<const uint8_t*>(p), /*e4m3=*/true);
  }
  static R Load(const Fp8E5M2Elem* p) {
    return Fp8Load16(reinterpret_cast<const uint8_t*>(p), /*e4m3=*/false);
  }
  static void Store(float* p, R a) { _mm512_storeu_ps(p, a); }
  static R Fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R Add(R a, R b) { return _mm512_add_ps(a, b); }
  // a, held in a register: the loads of values used by several fma stay single, and the other
  // operand (a broadcast) folds into the fma.
  static R Pin(R a) {
    asm("" : "+v"(a));
    return a;
  }
  static R Mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R Sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R Exp(R a) { return ExpApprox16(a); }
  static R KeepFirst(R a, int64_t n, float fill) {
    const auto keep = static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1);
    return _mm512_mask_blend_ps(keep, _mm512_set1_ps(fill), a);
  }
  // a > b ? a : b, lane by lane (std::max(b, a)).
  static R Max(R a, R b) { return _mm512_max_ps(a, b); }
  static R ZeroWhereNegInf(R m, R x) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), x,
                                _mm512_setzero_ps());
  }
  // Lane r: the largest lane of rows[r], and ReduceLanes16 of rows[r]: rows 0 .. 3 are read
  // where count <= 4 (a decode step's query), all 16 otherwise.
  static int RowsRead(int count) { return count <= 4 ? 4 : 16; }
  static R MaxRows(const float (*rows)[16], int count) {
    const auto max = [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); };
    return count <= 4 ? Butterfly4(rows, max) : Butterfly16(rows, max);
  }
  static R SumRows(const float (*rows)[16], int count) {
    return count <= 4 ? Butterfly4(rows, [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); })
                      : ReduceRows16(rows);
  }
  // Row r's lane j: ReduceLanes16 of the fma lanes of q[r] and k[j] (through memory, then the
  // butterfly). Each K vector is loaded once for the rows.
  template <int C, int kRows, typename T>
  static void Scores(const R (*q)[C], const T* const* k, R* out) {
    alignas(64) float acc[kRows][16][16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      R s[kRows];
      for (int r = 0; r < kRows; ++r) s[r] = Zero();
      for (int c = 0; c < C; ++c) {
        const R kv = Load(k[j] + 16 * c);
        for (int r = 0; r < kRows; ++r) s[r] = Fma(q[r][c], kv, s[r]);
      }
      for (int r = 0; r < kRows; ++r) Store(acc[r][j], s[r]);
    }
    for (int r = 0; r < kRows; ++r) out[r] = ReduceRows16(acc[r]);
  }
  // ReduceLanes16 of 16 rows at once: the same additions in the same pairs (lanes i and i + 8,
  // then 4, 2, 1 apart), as a butterfly across the rows that leaves row j's sum in lane j.
  static R ReduceRows16(const float (*rows)[16]) {
    return Butterfly16(rows, [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); });
  }
  // op over each of rows 0 .. 3's lanes in ReduceLanes16's pairs, row j's result in lane j
  // (lanes 4 .. 15 unspecified).
  template <typename Op>
  static R Butterfly4(const float (*rows)[16], Op op) {
    __m512 w[2];
    for (int m = 0; m < 2; ++m) {  // rows 2m, 2m + 1: lanes i and i + 8
      const __m512 a = _mm512_load_ps(rows[2 * m]), b = _mm512_load_ps(rows[2 * m + 1]);
      w[m] = op(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    // Then i and i + 4: row j's four partial sums in the 128-bit lane j.
    const __m512 x = op(_mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                        _mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512 y = op(x, _mm512_shuffle_ps(x, x, _MM_SHUFFLE(1, 0, 3, 2)));  // i and i + 2
    const __m512 z = op(y, _mm512_shuffle_ps(y, y, _MM_SHUFFLE(2, 3, 0, 1)));  // i and i + 1
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                                 z);
  }
  // op over each row's lanes, in ReduceLanes16's pairs, row j's result in lane j.
  template <typename Op>
  static R Butterfly16(const float (*rows)[16], Op op) {
    __m512 w[8], x[4], y[2];
    for (int m = 0; m < 8; ++m) {
      const __m512 a = _mm512_load_ps(rows[2 * m]), b = _mm512_load_ps(rows[2 * m + 1]);
      w[m] = op(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    for (int n = 0; n < 4; ++n) {
      x[n] = op(_mm512_shuffle_f32x4(w[2 * n], w[2 * n + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                _mm512_shuffle_f32x4(w[2 * n], w[2 * n + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
    for (int s = 0; s < 2; ++s) {
      y[s] = op(_mm512_shuffle_ps(x[2 * s], x[2 * s + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                _mm512_shuffle_ps(x[2 * s], x[2 * s + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    const __m512 out = op(_mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
    // Lane k of `out` holds row 4 (k % 4) + k / 4: a 4 x 4 transpose, its own inverse.
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, out);
  }
  static void HalvesToFloats(const uint16_t* h, float* f) { Store(f, Load(h)); }

  // kt[d * 16 + j] = k[j][d] for the chunk's 16 rows (widened from fp16), 16 dimensions at a
  // time: each 16 x 16 block is transposed in registers (pairs, then quads, then 128-bit lanes
  // twice).
  template <int C, typename T>
  static void Transpose(const T* const* k, float* kt) {
    for (int c = 0; c < C; ++c) {
      __m512 r[16], t[16], u[16];
      for (int j = 0; j < 16; ++j) r[j] = Load(k[j] + 16 * c);
      for (int p = 0; p < 8; ++p) {  // t[2p], t[2p + 1]: rows 2p, 2p + 1 interleaved
        t[2 * p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);
        t[2 * p + 1] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
      }
      for (int q = 0; q < 4; ++q) {  // u[4q + e], 128-bit lane i: dim 4i + e of rows 4q .. 4q + 3
        const __m512d a = _mm512_castps_pd(t[4 * q]), b = _mm512_castps_pd(t[4 * q + 2]);
        const __m512d x = _mm512_castps_pd(t[4 * q + 1]), y = _mm512_castps_pd(t[4 * q + 3]);
        u[4 * q] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        u[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        u[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(x, y));
        u[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(x, y));
      }
      for (int e = 0; e < 4; ++e) {  // dim 4i + e: lane i of u[e], u[4 + e], u[8 + e], u[12 + e]
        const __m512 v0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88);
        const __m512 v1 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xdd);
        const __m512 w0 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88);
        const __m512 w1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xdd);
        float* d = kt + (16 * c + e) * 16;
        Store(d, _mm512_shuffle_f32x4(v0, w0, 0x88));            // dim 4 * 0 + e
        Store(d + 4 * 16, _mm512_shuffle_f32x4(v1, w1, 0x88));   // dim 4 * 1 + e
        Store(d + 8 * 16, _mm512_shuffle_f32x4(v0, w0, 0xdd));   // dim 4 * 2 + e
        Store(d + 12 * 16, _mm512_shuffle_f32x4(v1, w1, 0xdd));  // dim 4 * 3 + e
      }
    }
  }
};

}  // namespace
}  // namespace pagellm::kernels::internal

#include "kernels/cpu/attention_tile_impl.h"

namespace pagellm::kernels::internal {
AttentionTileFn AttentionTileAvx512(int64_t head_dim) { return TileFor<V16>(head_dim); }
}  // namespace pagellm::kernels::internal

#pragma GCC diagnostic pop
