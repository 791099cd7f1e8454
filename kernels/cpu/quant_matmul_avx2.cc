// AVX2 kernel for QuantMatmul, for x86 CPUs without AVX-512 VNNI (AMD Zen 1 to 3, Intel before
// Ice Lake server): AVX2, FMA and F16C.
//
// AVX2 has no int8 dot product into int32. `vpmaddubsw` multiplies unsigned by signed bytes and
// adds pairs into int16 with saturation, and `vpmaddwd` against ones widens pairs of int16 into
// int32. The packed quants are unsigned and the activations are in [-127, 127], so a pair of
// 4-bit products is at most 2 * 15 * 127 = 3810 and eight pair sums still fit int16 (30480):
// a whole block of 4-bit quants takes 8 vpmaddubsw, 7 int16 adds and one vpmaddwd per row and
// activation row. 5-bit quants sum 4 vectors in int16, 6-bit quants 2. 8-bit quants (0..255)
// could overflow one pair, so they are multiplied as signed values u - 128 by the sign trick:
// |u - 128| times the activation with the weight's sign (at most 128 * 127 per product).
// Every int16 and int32 sum is exact, so each block's int32 dot product, and then the fp32
// epilogue (the same operations in the same order), are the portable kernel's: bit-identical.
//
// Tiles are one group (8 weight rows, one 256-bit vector of int32 or fp32 lanes) x up to 4
// activation rows: the group's 8 unpacked vectors, 4 accumulators and the temporaries fill the
// 16 vector registers. The activations come from their panels when there are any (one pointer
// per block for the tile), and rows go in chunks that stay in L1 while the weights stream.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/quant_layout.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_unpack_x86.h"

namespace pagellm::kernels::internal {
namespace {

constexpr int64_t kBlock = 32;

inline __m256i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// For 8-bit quants: |u - 128| and u - 128 as signed bytes (the sign trick's two operands).
struct Signed8 {
  __m256i mag[8], sgn[8];
};

inline void MakeSigned8(const Unpacked& u, Signed8* s) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int t = 0; t < 8; ++t) {
    s->sgn[t] = _mm256_xor_si256(u.wv[t], flip);
    s->mag[t] = _mm256_abs_epi8(s->sgn[t]);
  }
}

// int32 lanes: sum over vectors t in [t0, t0 + n) of row r's quants times the activations
// xq[4t..4t+3], summing kPerSum vpmaddubsw results in int16 before widening.
template <int kPerSum>
inline __m256i Span(const __m256i* wv, const int8_t* xq, int t0, int n) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc = _mm256_setzero_si256();
  for (int c = t0; c < t0 + n; c += kPerSum) {
    __m256i s = _mm256_maddubs_epi16(wv[c], Bcast4(xq + 4 * c));
    for (int k = 1; k < kPerSum; ++k)
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(wv[c + k], Bcast4(xq + 4 * (c + k))));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(s, ones));
  }
  return acc;
}

// The block's int32 dot products for the 8 rows, the weight offset removed (as the portable
// kernel's `dot`; kHalves scaled by the half scales).
template <GgmlType T>
inline __m256i Dot(const Unpacked& u, const Signed8& s8, int32_t sq, int32_t sq_lo,
                   const int8_t* xq) {
  constexpr PackedLayout L = LayoutOf(T);
  if constexpr (L.bits == 8) {  // offset 128: sum of (u - 128) * x
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
    for (int t = 0; t < 8; ++t) {
      const __m256i x = _mm256_sign_epi8(Bcast4(xq + 4 * t), s8.sgn[t]);
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(s8.mag[t], x), ones));
    }
    return acc;
  } else {
    constexpr int kPerSum = L.bits == 4 ? 8 : L.bits == 5 ? 4 : 2;
    if constexpr (L.scale == Scale::kHalves) {
      const __m256i lo =
          _mm256_add_epi32(_mm256_set1_epi32(-L.offset * sq_lo), Span<kPerSum>(u.wv, xq, 0, 4));
      const __m256i hi = _mm256_add_epi32(_mm256_set1_epi32(-L.offset * (sq - sq_lo)),
                                          Span<kPerSum>(u.wv, xq, 4, 4));
      return _mm256_add_epi32(_mm256_mullo_epi32(lo, u.sc_lo), _mm256_mullo_epi32(hi, u.sc_hi));
    } else {
      const __m256i d = Span<kPerSum>(u.wv, xq, 0, 8);
      return L.offset != 0 ? _mm256_add_epi32(_mm256_set1_epi32(-L.offset * sq), d) : d;
    }
  }
}

// Where a tile's activation rows are: block b of tile row i is at xq(b) + i * stride, its
// scalars at d(b)[i * step] etc. Panels (kPanels) put a tile's rows side by side per block.
template <bool kPanels>
struct Rows {
  const QuantizedActivations& x;
  int64_t m0, nb;
  const int8_t* Quants(int64_t b) const { return x.qs.data() + First(b) * kBlock; }
  int64_t QuantStride() const { return kPanels ? kBlock : x.cols; }
  int64_t First(int64_t b) const { return x.Slot(m0, b); }
  int64_t Step() const { return kPanels ? 1 : nb; }
  const float* D() const { return x.d.data(); }
  const float* S() const { return x.s.data(); }
  const int32_t* Sq() const { return x.sumq.data(); }
  const int32_t* SqLo() const { return x.sumq_lo.data(); }
};

// Group g against activation rows [m0, m0 + MT). With kPanels the rows lie in one panel.
template <GgmlType T, int MT, bool kPanels>
void Tile(const PackedQuantMatrix& w, int64_t g, const QuantizedActivations& x, int64_t m0,
          float* y, int64_t ldy) {
  constexpr PackedLayout L = LayoutOf(T);
  const int64_t nb = x.cols / kBlock;
  const Rows<kPanels> rows{x, m0, nb};
  __m256 acc[MT];
#pragma GCC unroll 4
  for (int i = 0; i < MT; ++i) acc[i] = _mm256_setzero_ps();
  Unpacked u;
  Signed8 s8;
  for (int64_t b = 0; b < nb; ++b) {
    Unpack<T>(w, g, b, nb, &u);
    if constexpr (L.bits == 8) MakeSigned8(u, &s8);
    const int8_t* xq = rows.Quants(b);
    const int64_t first = rows.First(b), step = rows.Step(), stride = rows.QuantStride();
#pragma GCC unroll 4
    for (int i = 0; i < MT; ++i) {
      const int64_t xb = first + i * step;
      const __m256i dot = Dot<T>(u, s8, rows.Sq()[xb], rows.SqLo()[xb], xq + i * stride);
      acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(dot), u.dw),
                               _mm256_set1_ps(rows.D()[xb]), acc[i]);
      if constexpr (L.has_min())
        acc[i] = _mm256_fmadd_ps(u.mw, _mm256_set1_ps(rows.S()[xb]), acc[i]);
    }
  }
  const int64_t n0 = g * 8;
  const int64_t valid = std::min<int64_t>(8, w.n_out - n0);
  if (valid == 8) {
#pragma GCC unroll 4
    for (int i = 0; i < MT; ++i) _mm256_storeu_ps(y + (m0 + i) * ldy + n0, acc[i]);
  } else {
    alignas(32) float out[8];
#pragma GCC unroll 4
    for (int i = 0; i < MT; ++i) {
      _mm256_store_ps(out, acc[i]);
      std::memcpy(y + (m0 + i) * ldy + n0, out, valid * sizeof(float));
    }
  }
}

// Group g against rows [m_begin, m_end): tiles of 4, then the rest. With kPanels, m_begin is a
// multiple of 4 (so no tile straddles a panel of 16).
template <GgmlType T, bool kPanels>
void GroupRows(const PackedQuantMatrix& w, int64_t g, const QuantizedActivations& x,
               int64_t m_begin, int64_t m_end, float* y, int64_t ldy) {
  int64_t m = m_begin;
  for (; m + 4 <= m_end; m += 4) Tile<T, 4, kPanels>(w, g, x, m, y, ldy);
  switch (m_end - m) {
    case 3:
      return Tile<T, 3, kPanels>(w, g, x, m, y, ldy);
    case 2:
      return Tile<T, 2, kPanels>(w, g, x, m, y, ldy);
    case 1:
      return Tile<T, 1, kPanels>(w, g, x, m, y, ldy);
    default:
      return;
  }
}

template <GgmlType T>
void Groups(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
            const QuantizedActivations& x, float* y, int64_t ldy) {
  if (!x.has_panels()) {
    for (int64_t g = g_begin; g < g_end; ++g) GroupRows<T, false>(w, g, x, 0, x.rows, y, ldy);
    return;
  }
  // Activation rows in chunks that stay in L1 (a 32 KB one: 24 KB of activations) while this
  // thread's groups stream past; weights too large for the caches (a large vocabulary's output
  // projection) get chunks of up to 256 KB, so that they come from DRAM fewer times.
  const int64_t weight_bytes = (g_end - g_begin) * (x.cols / kBlock) * w.block_bytes;
  const int64_t chunk_bytes = weight_bytes > (4 << 20) ? (256 << 10) : (24 << 10);
  const int64_t chunk = std::max<int64_t>(16, (chunk_bytes / x.cols) / 16 * 16);
  for (int64_t m0 = 0; m0 < x.rows; m0 += chunk) {
    const int64_t m1 = std::min(x.rows, m0 + chunk);
    for (int64_t g = g_begin; g < g_end; ++g) GroupRows<T, true>(w, g, x, m0, m1, y, ldy);
  }
}

}  // namespace

void QuantizeRowAvx2(const float* x, int64_t nb, int64_t stride, int8_t* qs, float* ds, float* ss,
                     int32_t* sums, int32_t* sums_lo) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  for (int64_t b = 0; b < nb; ++b) {
    const float* src = x + b * kBlock;
    const int64_t o = b * stride;
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(src + 8 * k);
    __m256 m =
        _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                      _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    const float d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];  // rounded half to even (the default rounding mode, as std::nearbyint)
    for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
    // int32 -> int8 in order: the packs interleave 128-bit lanes, the permute restores them.
    const __m256i w01 = _mm256_packs_epi32(q[0], q[1]), w23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23),
                                                      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + o * kBlock), bytes);
    auto hsum = [](__m256i a) {
      __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
      return _mm_cvtsi128_si32(s);
    };
    const int32_t sum_lo = hsum(_mm256_add_epi32(q[0], q[1]));
    const int32_t sum = sum_lo + hsum(_mm256_add_epi32(q[2], q[3]));
    ds[o] = d;
    ss[o] = d * static_cast<float>(sum);
    sums[o] = sum;
    sums_lo[o] = sum_lo;
  }
}

void QuantMatmulGroupsAvx2(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
                           const QuantizedActivations& x, float* y, int64_t ldy) {
  ForPackedType(w.type,
                [&](auto type) { Groups<decltype(type)::value>(w, g_begin, g_end, x, y, ldy); });
}

}  // namespace pagellm::kernels::internal
