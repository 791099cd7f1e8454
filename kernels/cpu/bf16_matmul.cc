#include "kernels/cpu/bf16_matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/half.h"
#include "kernels/cpu/cpu_features.h"

namespace pagellm::kernels {
namespace {

constexpr int64_t kLanes = 16;
// Activation rows per register tile: 12 rows x 2 vectors of accumulators (24 of the 32 zmm
// registers), 2 for the widened weights: per input element one 64-byte line, 2 widening
// instructions and 24 fused multiply-adds.
constexpr int kTileRows = 12;
// Activation rows per pass over a thread's panels: their fp32 values (rows x n_in x 4 bytes)
// stay in L2 (about 1 MiB) while the panels stream past.
constexpr int64_t kChunkBytes = 1 << 20;

// The store masks of a panel's two 16-output halves when only its first `valid` (<= 32)
// outputs exist.
struct HalfMasks {
  __mmask16 lo, hi;
};
inline HalfMasks MasksFor(int64_t valid) {
  return {static_cast<__mmask16>((1u << std::min<int64_t>(valid, 16)) - 1),
          static_cast<__mmask16>((1u << std::clamp<int64_t>(valid - 16, 0, 16)) - 1)};
}

// Panels [p_begin, p_end) of w for all `rows` activation rows of `row_bytes` each, in chunks of
// rows that stay in L2 while the panels stream past: fn(m0, mr, p, n0, valid) for rows
// [m0, m0 + mr) and panel p, whose outputs are [n0, n0 + valid).
template <class Fn>
void ForPanelsInRowChunks(int64_t rows, int64_t row_bytes, const PackedBf16Matrix& w,
                          int64_t p_begin, int64_t p_end, Fn&& fn) {
  const int64_t chunk =
      std::max<int64_t>(kTileRows, kChunkBytes / row_bytes / kTileRows * kTileRows);
  for (int64_t m0 = 0; m0 < rows; m0 += chunk) {
    const int64_t mr = std::min(chunk, rows - m0);
    for (int64_t p = p_begin; p < p_end; ++p) {
      const int64_t n0 = p * PackedBf16Matrix::kPanelRows;
      fn(m0, mr, p, n0, std::min(PackedBf16Matrix::kPanelRows, w.n_out - n0));
    }
  }
}

// Panel p's row r, element k.
inline float Weight(const uint32_t* panel, int64_t k, int64_t r) {
  const uint32_t lane = panel[k * kLanes + r % kLanes];
  return Bf16ToFloat(static_cast<uint16_t>(r < kLanes ? lane : lane >> 16));
}

void PanelPortable(const float* x, int64_t rows, int64_t ldx, const uint32_t* panel, int64_t k,
                   float* y, int64_t ldy, int64_t valid) {
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t r = 0; r < valid; ++r) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc = std::fma(x[m * ldx + i], Weight(panel, i, r), acc);
      y[m * ldy + r] = acc;
    }
  }
}

// GCC 12 reports its own _mm512_set1_ps as maybe-uninitialized when inlined into arrays.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <int MT>
__attribute__((target("avx512f"))) void TileAvx512(const float* x, int64_t ldx,
                                                   const uint32_t* panel, int64_t k, float* y,
                                                   int64_t ldy, __mmask16 mask_lo,
                                                   __mmask16 mask_hi) {
  __m512 lo_acc[MT], hi_acc[MT];
#pragma GCC unroll 12
  for (int i = 0; i < MT; ++i) lo_acc[i] = hi_acc[i] = _mm512_setzero_ps();
  const __m512i high = _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u));
  for (int64_t e = 0; e < k; ++e) {
    const __m512i line = _mm512_loadu_si512(panel + e * kLanes);
    const __m512 lo = _mm512_castsi512_ps(_mm512_slli_epi32(line, 16));
    const __m512 hi = _mm512_castsi512_ps(_mm512_and_si512(line, high));
#pragma GCC unroll 12
    for (int i = 0; i < MT; ++i) {
      const __m512 a = _mm512_set1_ps(x[i * ldx + e]);
      lo_acc[i] = _mm512_fmadd_ps(a, lo, lo_acc[i]);
      hi_acc[i] = _mm512_fmadd_ps(a, hi, hi_acc[i]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MT; ++i) {
    _mm512_mask_storeu_ps(y + i * ldy, mask_lo, lo_acc[i]);
    _mm512_mask_storeu_ps(y + i * ldy + kLanes, mask_hi, hi_acc[i]);
  }
}

#pragma GCC diagnostic pop

using TileFn = void (*)(const float*, int64_t, const uint32_t*, int64_t, float*, int64_t, __mmask16,
                        __mmask16);

template <int... I>
constexpr auto MakeTiles(std::integer_sequence<int, I...>) {
  return std::array<TileFn, sizeof...(I)>{TileAvx512<I + 1>...};
}
constexpr auto kTiles = MakeTiles(std::make_integer_sequence<int, kTileRows>());

void PanelAvx512(const float* x, int64_t rows, int64_t ldx, const uint32_t* panel, int64_t k,
                 float* y, int64_t ldy, int64_t valid) {
  const HalfMasks mask = MasksFor(valid);
  for (int64_t m = 0; m < rows; m += kTileRows) {
    const int64_t mt = std::min<int64_t>(kTileRows, rows - m);
    kTiles[mt - 1](x + m * ldx, ldx, panel, k, y + m * ldy, ldy, mask.lo, mask.hi);
  }
}

// AVX2: a panel's 16 lanes of 32 bits in two 256-bit halves, so four vectors of widened
// weights per element (rows 0-7, 8-15 from the low halves, 16-23, 24-31 from the high ones)
// and tiles of 3 activation rows (12 accumulators: 16 registers in all). Per output the same
// fma chain over k as the portable panel.
constexpr int kTileRowsAvx2 = 3;

template <int MT>
__attribute__((target("avx2,fma"))) void TileAvx2(const float* x, int64_t ldx,
                                                  const uint32_t* panel, int64_t k, float* y,
                                                  int64_t ldy, int64_t valid) {
  __m256 acc[MT][4];
  for (int i = 0; i < MT; ++i)
    for (int q = 0; q < 4; ++q) acc[i][q] = _mm256_setzero_ps();
  const __m256i high = _mm256_set1_epi32(static_cast<int32_t>(0xFFFF0000u));
  for (int64_t e = 0; e < k; ++e) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + e * kLanes));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + e * kLanes + 8));
    const __m256 w[4] = {_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)),
                         _mm256_castsi256_ps(_mm256_slli_epi32(b, 16)),
                         _mm256_castsi256_ps(_mm256_and_si256(a, high)),
                         _mm256_castsi256_ps(_mm256_and_si256(b, high))};
    for (int i = 0; i < MT; ++i) {
      const __m256 xv = _mm256_set1_ps(x[i * ldx + e]);
      for (int q = 0; q < 4; ++q) acc[i][q] = _mm256_fmadd_ps(xv, w[q], acc[i][q]);
    }
  }
  alignas(32) float out[32];
  for (int i = 0; i < MT; ++i) {
    for (int q = 0; q < 4; ++q) _mm256_store_ps(out + 8 * q, acc[i][q]);
    std::copy(out, out + valid, y + i * ldy);
  }
}

void PanelAvx2(const float* x, int64_t rows, int64_t ldx, const uint32_t* panel, int64_t k,
               float* y, int64_t ldy, int64_t valid) {
  int64_t m = 0;
  for (; m + kTileRowsAvx2 <= rows; m += kTileRowsAvx2)
    TileAvx2<kTileRowsAvx2>(x + m * ldx, ldx, panel, k, y + m * ldy, ldy, valid);
  if (rows - m == 2) TileAvx2<2>(x + m * ldx, ldx, panel, k, y + m * ldy, ldy, valid);
  if (rows - m == 1) TileAvx2<1>(x + m * ldx, ldx, panel, k, y + m * ldy, ldy, valid);
}

// --- AVX512-BF16 (kPairs) ---

// Rows [0, MT) of the rounded activations (kp apart) against one panel: 32 outputs a row in two
// accumulators, per pair of elements two weight lines and one broadcast pair a row.
template <int MT>
__attribute__((target("avx512f,avx512bf16"))) void PairTile(const uint16_t* xb, int64_t kp,
                                                            const uint32_t* panel, float* y,
                                                            int64_t ldy, __mmask16 mask_lo,
                                                            __mmask16 mask_hi) {
  __m512 lo_acc[MT], hi_acc[MT];
#pragma GCC unroll 12
  for (int i = 0; i < MT; ++i) lo_acc[i] = hi_acc[i] = _mm512_setzero_ps();
  for (int64_t e = 0; e < kp; e += 2) {
    const __m512i w0 = _mm512_loadu_si512(panel + e * kLanes);
    const __m512i w1 = _mm512_loadu_si512(panel + e * kLanes + kLanes);
#pragma GCC unroll 12
    for (int i = 0; i < MT; ++i) {
      uint32_t pair;
      std::memcpy(&pair, xb + i * kp + e, 4);
      const __m512i a = _mm512_set1_epi32(static_cast<int32_t>(pair));
      lo_acc[i] = _mm512_dpbf16_ps(lo_acc[i], (__m512bh)a, (__m512bh)w0);
      hi_acc[i] = _mm512_dpbf16_ps(hi_acc[i], (__m512bh)a, (__m512bh)w1);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MT; ++i) {
    _mm512_mask_storeu_ps(y + i * ldy, mask_lo, lo_acc[i]);
    _mm512_mask_storeu_ps(y + i * ldy + kLanes, mask_hi, hi_acc[i]);
  }
}

using PairTileFn = void (*)(const uint16_t*, int64_t, const uint32_t*, float*, int64_t, __mmask16,
                            __mmask16);
template <int... I>
constexpr auto MakePairTiles(std::integer_sequence<int, I...>) {
  return std::array<PairTileFn, sizeof...(I)>{PairTile<I + 1>...};
}
constexpr auto kPairTiles = MakePairTiles(std::make_integer_sequence<int, kTileRows>());

// Panels [p_begin, p_end) of a kPairs matrix for all rows, in row chunks that stay in L2.
void PairPanels(const uint16_t* xb, int64_t rows, const PackedBf16Matrix& w, int64_t p_begin,
                int64_t p_end, float* y, int64_t ldy) {
  const int64_t kp = w.k_padded;
  ForPanelsInRowChunks(rows, kp * 2, w, p_begin, p_end,
                       [&](int64_t m0, int64_t mr, int64_t p, int64_t n0, int64_t valid) {
                         const HalfMasks mask = MasksFor(valid);
                         const uint32_t* panel = w.data.data() + p * kp * kLanes;
                         for (int64_t m = m0; m < m0 + mr; m += kTileRows) {
                           const int64_t mt = std::min<int64_t>(kTileRows, m0 + mr - m);
                           kPairTiles[mt - 1](xb + m * kp, kp, panel, y + m * ldy + n0, ldy,
                                              mask.lo, mask.hi);
                         }
                       });
}

// --- AMX (kAmxTiles) ---

// ldtilecfg's 64-byte operand.
struct TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// The activation rows rounded to bf16, k_padded apart (zeros past n_in), in rows rounded up to
// 16 (zero rows: a tile loads 16). Round to nearest even, as PackBf16Matrix.
__attribute__((target("avx512f,avx512bf16"))) void RoundRowsToBf16(const float* x, int64_t rows,
                                                                   int64_t ldx, int64_t k,
                                                                   int64_t kp, uint16_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = x + r * ldx;
    uint16_t* dst = out + r * kp;
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i))));
    }
    for (; i < k; ++i) dst[i] = FloatToBf16(src[i]);
    for (; i < kp; ++i) dst[i] = 0;
  }
  const int64_t padded = (rows + 15) / 16 * 16;
  std::fill(out + rows * kp, out + padded * kp, uint16_t{0});
}

// Requests two weight tiles (1 KiB each) into L2: the next panel's, while this one computes.
inline void Prefetch(const uint32_t* t0, const uint32_t* t1) {
  for (int i = 0; i < 256; i += 16) {
    _mm_prefetch(reinterpret_cast<const char*>(t0 + i), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(t1 + i), _MM_HINT_T1);
  }
}

// Panels [p_begin, p_end) for all rows: 32 x 32 outputs at a time in four accumulator tiles
// (0-3), two activation tiles (4, 5) and two weight tiles (6, 7), K in steps of 32.
__attribute__((target("amx-tile,amx-bf16,avx512f"))) void AmxPanels(const uint16_t* xb,
                                                                    int64_t rows,
                                                                    const PackedBf16Matrix& w,
                                                                    int64_t p_begin, int64_t p_end,
                                                                    float* y, int64_t ldy) {
  TileConfig cfg{};
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  const int64_t kp = w.k_padded, kbs = kp / PackedBf16Matrix::kTileK, xstride = kp * 2;
  constexpr int64_t kTileWords = 256;
  alignas(64) float c[4][256];
  for (int64_t p = p_begin; p < p_end; ++p) {
    const uint32_t* b0 = w.data.data() + 2 * p * kbs * kTileWords;
    const uint32_t* b1 = b0 + kbs * kTileWords;
    const int64_t n0 = p * PackedBf16Matrix::kPanelRows;
    const int64_t valid = std::min(PackedBf16Matrix::kPanelRows, w.n_out - n0);
    const HalfMasks mask = MasksFor(valid);
    // Block kb of the panel's two halves into tiles 6 and 7; the first row block also requests
    // the next panel's.
    auto load_weights = [&](int64_t m, int64_t kb) {
      if (m == 0 && p + 1 < p_end)
        Prefetch(b0 + (2 * kbs + kb) * kTileWords, b1 + (2 * kbs + kb) * kTileWords);
      _tile_loadd(6, b0 + kb * kTileWords, 64);
      _tile_loadd(7, b1 + kb * kTileWords, 64);
    };
    for (int64_t m = 0; m < rows; m += 32) {
      const uint16_t* a0 = xb + m * kp;
      const uint16_t* a1 = a0 + 16 * kp;
      _tile_zero(0);
      _tile_zero(1);
      if (m + 16 < rows) {
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t kb = 0; kb < kbs; ++kb) {
          load_weights(m, kb);
          _tile_loadd(4, a0 + kb * 32, xstride);
          _tile_loadd(5, a1 + kb * 32, xstride);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(2, c[2], 64);
        _tile_stored(3, c[3], 64);
      } else {
        for (int64_t kb = 0; kb < kbs; ++kb) {
          load_weights(m, kb);
          _tile_loadd(4, a0 + kb * 32, xstride);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
        }
      }
      _tile_stored(0, c[0], 64);
      _tile_stored(1, c[1], 64);
      const int64_t mr = std::min<int64_t>(32, rows - m);
      for (int64_t r = 0; r < mr; ++r) {
        const float* src0 = c[2 * (r / 16)] + (r % 16) * 16;
        const float* src1 = c[2 * (r / 16) + 1] + (r % 16) * 16;
        float* dst = y + (m + r) * ldy + n0;
        _mm512_mask_storeu_ps(dst, mask.lo, _mm512_load_ps(src0));
        _mm512_mask_storeu_ps(dst + 16, mask.hi, _mm512_load_ps(src1));
      }
    }
  }
  _tile_release();
}

// kLanes: panels [p_begin, p_end) of w for all rows, in row chunks that stay in L2.
void LanePanels(const float* x, int64_t rows, int64_t ldx, const PackedBf16Matrix& w,
                int64_t p_begin, int64_t p_end, float* y, int64_t ldy, bool vector) {
  const CpuFeatures& cpu = GetCpuFeatures();
  const auto panel_fn = !vector      ? PanelPortable
                        : cpu.avx512 ? PanelAvx512
                        : cpu.avx2   ? PanelAvx2
                                     : PanelPortable;
  const int64_t k = w.n_in;
  ForPanelsInRowChunks(rows, k * 4, w, p_begin, p_end,
                       [&](int64_t m0, int64_t mr, int64_t p, int64_t n0, int64_t valid) {
                         panel_fn(x + m0 * ldx, mr, ldx, w.data.data() + p * k * kLanes, k,
                                  y + m0 * ldy + n0, ldy, valid);
                       });
}

// PreferredBf16Layout's measurement: seconds for `iters` rounds of twelve independent chains of
// one instruction on registers (the operands hidden from the compiler each round, so that it
// can neither fold nor hoist them). The sums go to a volatile sink.
constexpr int kRateChains = 12;
volatile float rate_sink;

// The two instructions, on operands that make neither overflow: acc + 1 * 2^-20 (twice for
// the pairs).
struct PairStep {
  using T = __m512bh;
  __attribute__((target("avx512f,avx512bf16"))) static T Operand(float x) {
    return _mm512_cvtne2ps_pbh(_mm512_set1_ps(x), _mm512_set1_ps(x));
  }
  __attribute__((target("avx512f,avx512bf16"))) static __m512 Step(__m512 acc, T a, T b) {
    return _mm512_dpbf16_ps(acc, a, b);
  }
};
struct FmaStep {
  using T = __m512;
  __attribute__((target("avx512f"))) static T Operand(float x) { return _mm512_set1_ps(x); }
  __attribute__((target("avx512f,fma"))) static __m512 Step(__m512 acc, T a, T b) {
    return _mm512_fmadd_ps(a, b, acc);
  }
};

template <class S>
__attribute__((target("avx512f,avx512bf16,fma"))) double ChainsSeconds(int64_t iters) {
  __m512 acc[kRateChains];
  for (int c = 0; c < kRateChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  typename S::T a = S::Operand(1.0f), b = S::Operand(0x1p-20f);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile("" : "+v"(a), "+v"(b));
#pragma GCC unroll 12
    for (int c = 0; c < kRateChains; ++c) acc[c] = S::Step(acc[c], a, b);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  __m512 sum = acc[0];
  for (int c = 1; c < kRateChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  rate_sink = lanes[0] + lanes[15];
  return s;
}

}  // namespace

namespace internal {
DotRates MeasureDotRates() {
  // 4096 rounds: ~50k instructions, 20-50 us each; the first rounds also wake the 512-bit units.
  constexpr int64_t kIters = 4096;
  constexpr int kRounds = 8;
  double pairs = 1e30, fma = 1e30;
  for (int r = 0; r < kRounds; ++r) {
    pairs = std::min(pairs, ChainsSeconds<PairStep>(kIters));
    fma = std::min(fma, ChainsSeconds<FmaStep>(kIters));
  }
  const double per_round = kIters * kRateChains * 16.0;  // lanes x instructions
  DotRates rates;
  rates.pairs_flops = per_round * 4.0 / pairs;  // two multiply-adds a lane
  rates.fma_flops = per_round * 2.0 / fma;
  return rates;
}
}  // namespace internal

Bf16Layout PreferredBf16Layout() {
  static const Bf16Layout layout = [] {
    const CpuFeatures& cpu = GetCpuFeatures();
    const char* env = std::getenv("PAGELLM_BF16_PAIRS");
    const bool pinned =
        env != nullptr && (std::strcmp(env, "0") == 0 || std::strcmp(env, "1") == 0);
    const bool measure = !cpu.amx_bf16 && cpu.avx512_bf16 && !pinned;
    return internal::ChooseBf16Layout(cpu, env,
                                      measure ? internal::MeasureDotRates() : internal::DotRates{});
  }();
  return layout;
}

const char* Bf16LayoutName(Bf16Layout layout) {
  switch (layout) {
    case Bf16Layout::kAmxTiles:
      return "AMX tiles";
    case Bf16Layout::kPairs:
      return "vdpbf16ps pairs";
    case Bf16Layout::kLanes:
      break;
  }
  return "fp32 lanes";
}

PackedBf16Matrix PackBf16Matrix(const float* w, int64_t n_out, int64_t n_in) {
  return internal::PackBf16MatrixAs(w, n_out, n_in, PreferredBf16Layout());
}

namespace internal {
Bf16Layout ChooseBf16Layout(const CpuFeatures& cpu, const char* pairs_env, const DotRates& rates) {
  if (cpu.amx_bf16) return Bf16Layout::kAmxTiles;
  if (!cpu.avx512_bf16) return Bf16Layout::kLanes;
  if (pairs_env != nullptr && std::strcmp(pairs_env, "1") == 0) return Bf16Layout::kPairs;
  if (pairs_env != nullptr && std::strcmp(pairs_env, "0") == 0) return Bf16Layout::kLanes;
  // Per 32 output rows, two input elements and one activation row, kPairs issues two
  // `vdpbf16ps` and kLanes four fma (plus the widening, shared by the tile's rows): kPairs wins
  // where one `vdpbf16ps` costs less than two fma, i.e. where its FLOP rate is the higher. On a
  // tie kLanes, which keeps the activations in fp32.
  return rates.pairs_flops > rates.fma_flops ? Bf16Layout::kPairs : Bf16Layout::kLanes;
}

PackedBf16Matrix PackBf16MatrixAs(const float* w, int64_t n_out, int64_t n_in, Bf16Layout layout) {
  PackedBf16Matrix p;
  p.layout = layout;
  p.n_out = n_out;
  p.n_in = n_in;
  const int64_t tk = PackedBf16Matrix::kTileK;
  p.k_padded = layout == Bf16Layout::kAmxTiles ? (n_in + tk - 1) / tk * tk
               : layout == Bf16Layout::kPairs  ? (n_in + 1) / 2 * 2
                                               : n_in;
  p.data.assign(p.panels() * p.k_padded * kLanes, 0);
  for (int64_t n = 0; n < n_out; ++n) {
    const int64_t panel = n / PackedBf16Matrix::kPanelRows, r = n % PackedBf16Matrix::kPanelRows;
    for (int64_t k = 0; k < n_in; ++k) {
      const uint32_t h = FloatToBf16(w[n * n_in + k]);
      if (layout == Bf16Layout::kLanes) {
        p.data[(panel * n_in + k) * kLanes + r % kLanes] |= h << (r < kLanes ? 0 : 16);
      } else if (layout == Bf16Layout::kPairs) {
        // Pair k / 2 of the panel: line r / 16, lane r % 16, half k % 2.
        p.data[(panel * p.k_padded + k / 2 * 2 + r / kLanes) * kLanes + r % kLanes] |=
            h << (16 * (k % 2));
      } else {
        // Half (panel, r / 16), tile k / 32, tile row (k % 32) / 2, column r % 16, slot k % 2.
        const int64_t tile = (2 * panel + r / kLanes) * (p.k_padded / tk) + k / tk;
        p.data[tile * 256 + (k % tk) / 2 * kLanes + r % kLanes] |= h << (16 * (k % 2));
      }
    }
  }
  return p;
}

void Bf16MatmulPath(const Bf16MatmulJob* jobs, int num_jobs, const float* x, int64_t rows,
                    int64_t ldx, ThreadPool* pool, bool vector) {
  if (num_jobs <= 0 || rows <= 0) return;
  const PackedBf16Matrix& first = *jobs[0].w;
  const bool amx = first.layout == Bf16Layout::kAmxTiles;
  const bool pairs = first.layout == Bf16Layout::kPairs;
  const uint16_t* rounded = nullptr;
  if (amx || pairs) {
    // The calling (engine) thread's buffer: grows to the largest batch, then is reused. (A
    // thread-local name means the running thread's own: the workers get the pointer.)
    thread_local std::vector<uint16_t> xb;
    const int64_t need = (rows + 15) / 16 * 16 * first.k_padded;
    if (static_cast<int64_t>(xb.size()) < need) xb.resize(need);
    RoundRowsToBf16(x, rows, ldx, first.n_in, first.k_padded, xb.data());
    rounded = xb.data();
  }
  auto panels = [&](int j) { return jobs[j].w->panels(); };
  auto work = [&](int64_t begin, int64_t end, int) {
    ForEachJobRange(num_jobs, panels, begin, end, [&](int j, int64_t lo, int64_t hi) {
      const Bf16MatmulJob& job = jobs[j];
      if (amx) {
        AmxPanels(rounded, rows, *job.w, lo, hi, job.y, job.ldy);
      } else if (pairs) {
        PairPanels(rounded, rows, *job.w, lo, hi, job.y, job.ldy);
      } else {
        LanePanels(x, rows, ldx, *job.w, lo, hi, job.y, job.ldy, vector);
      }
    });
  };
  int64_t total = 0;
  for (int j = 0; j < num_jobs; ++j) total += panels(j);
  if (pool != nullptr) {
    pool->ParallelFor(total, work);
  } else {
    work(0, total, 0);
  }
}
}  // namespace internal

void Bf16Matmul(const float* x, int64_t rows, int64_t ldx, const PackedBf16Matrix& w, float* y,
                int64_t ldy, ThreadPool* pool) {
  const Bf16MatmulJob job{&w, y, ldy};
  Bf16MatmulMany(&job, 1, x, rows, ldx, pool);
}

void Bf16MatmulMany(const Bf16MatmulJob* jobs, int num_jobs, const float* x, int64_t rows,
                    int64_t ldx, ThreadPool* pool) {
  internal::Bf16MatmulPath(jobs, num_jobs, x, rows, ldx, pool, /*vector=*/true);
}

}  // namespace pagellm::kernels
