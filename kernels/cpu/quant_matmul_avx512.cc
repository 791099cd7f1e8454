// AVX-512 VNNI kernel for QuantMatmul over packed groups of 8 rows (256-bit vectors, AVX512VL;
// for more than two activation rows, pairs of groups in 512-bit vectors), and AMX-INT8 from 128
// activation rows where the OS permits AMX.
// Per group-block: the 8 rows' quants are unpacked once into 8 vectors (quant_layout.h) and
// their scales into one or two; each activation row then needs 8 dpbusd, each reading its 4
// activation bytes as an embedded broadcast (one int32 chain; Q6_K keeps one per 16-element
// half for its half scales), one cvt, one mul and one fma (+ one fma for a min) to advance all
// 8 rows' accumulators. Bit-identical to the portable kernel: the int32 dot products are exact
// and the fp32 operations are the same.
//
// The multi-row path: tiles of up to 16 activation rows x 16 weight rows, the activations read
// from their panels (quant_matmul.h: one pointer per block for the whole tile, so the 16
// accumulators, 8 weight vectors and scales stay in registers). From 32 rows (prefill, large
// decode batches) a pair of groups is unpacked once per chunk of rows into a buffer that the
// chunk's tiles load from; with fewer, each tile unpacks as it goes, the rows in chunks sized
// for L1 and the next pair's weights requested while a chunk's first tile computes. The AMX
// path (GroupsAmx) computes the same int32 dot products with one tdpbsud per block and panel
// from the same buffer and runs the same fp32 epilogue, so it gives the same bits too.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_layout.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_unpack_x86.h"

// GCC 12's AVX-512 intrinsics start some results from _mm512_undefined_*, which it then
// reports as maybe-uninitialized wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pagellm::kernels::internal {
namespace {

constexpr int64_t kBlock = 32;

// The int32 dot products of one activation row (block xb, quants xq) with the unpacked rows, in
// vectors V of int32 (256 or 512 bits), starting from the weight offset's part. One chain of 8
// dpbusd (int32 sums are exact, so the order is free); kHalves keeps one chain per 16-element
// half, each scaled by its half's scale. Each dpbusd reads its 4 activation bytes as an embedded
// broadcast (one instruction, not a broadcast and a dpbusd: the tile is issue-bound).
// (sq, sq_lo: the block's sum of quants and of its first half's.)
template <GgmlType T, typename V, typename Ops>
inline V Dot(const V* wv, const V& sc_lo, const V& sc_hi, int32_t sq, int32_t sq_lo,
             const int8_t* xq) {
  constexpr PackedLayout L = LayoutOf(T);
  if constexpr (L.scale == Scale::kHalves) {
    V d0 = Ops::Set1(-L.offset * sq_lo);
    V d1 = Ops::Set1(-L.offset * (sq - sq_lo));
    for (int t = 0; t < 4; ++t) {
      d0 = Ops::DpbusdBcast(d0, wv[t], xq + 4 * t);
      d1 = Ops::DpbusdBcast(d1, wv[t + 4], xq + 16 + 4 * t);
    }
    return Ops::Add(Ops::Mullo(d0, sc_lo), Ops::Mullo(d1, sc_hi));
  } else {
    V d = L.offset != 0 ? Ops::Set1(-L.offset * sq) : Ops::Zero();
    for (int t = 0; t < 4; ++t) {
      d = Ops::DpbusdBcast(d, wv[t], xq + 4 * t);
      d = Ops::DpbusdBcast(d, wv[t + 4], xq + 16 + 4 * t);
    }
    return d;
  }
}

struct Ops256 {
  static __m256i Set1(int32_t v) { return _mm256_set1_epi32(v); }
  static __m256i Zero() { return _mm256_setzero_si256(); }
  // acc + dpbusd(w, the 4 bytes at p in every lane), the broadcast embedded in the instruction.
  static __m256i DpbusdBcast(__m256i acc, __m256i w, const int8_t* p) {
    asm("vpdpbusd %2%{1to8%}, %1, %0"
        : "+v"(acc)
        : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
    return acc;
  }
  static __m256i Add(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
  static __m256i Mullo(__m256i a, __m256i b) { return _mm256_mullo_epi32(a, b); }
};

struct Ops512 {
  static __m512i Set1(int32_t v) { return _mm512_set1_epi32(v); }
  static __m512i Zero() { return _mm512_setzero_si512(); }
  static __m512i DpbusdBcast(__m512i acc, __m512i w, const int8_t* p) {
    asm("vpdpbusd %2%{1to16%}, %1, %0"
        : "+v"(acc)
        : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
    return acc;
  }
  static __m512i Add(__m512i a, __m512i b) { return _mm512_add_epi32(a, b); }
  static __m512i Mullo(__m512i a, __m512i b) { return _mm512_mullo_epi32(a, b); }
};

template <GgmlType T, int MT, int NG>
void Tile(const PackedQuantMatrix& w, int64_t g0, const QuantizedActivations& x, int64_t m0,
          float* y, int64_t ldy) {
  constexpr PackedLayout L = LayoutOf(T);
  const int64_t nb = x.cols / kBlock;
  __m256 acc[NG][MT];
  for (int g = 0; g < NG; ++g)
    for (int i = 0; i < MT; ++i) acc[g][i] = _mm256_setzero_ps();
  Unpacked u;
  for (int64_t b = 0; b < nb; ++b) {
    for (int g = 0; g < NG; ++g) {
      Unpack<T>(w, g0 + g, b, nb, &u);
      for (int i = 0; i < MT; ++i) {
        const int64_t xb = x.Slot(m0 + i, b);
        const int8_t* xq = x.qs.data() + xb * kBlock;
        const __m256i dot =
            Dot<T, __m256i, Ops256>(u.wv, u.sc_lo, u.sc_hi, x.sumq[xb], x.sumq_lo[xb], xq);
        acc[g][i] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(dot), u.dw),
                                    _mm256_set1_ps(x.d[xb]), acc[g][i]);
        if constexpr (L.has_min())
          acc[g][i] = _mm256_fmadd_ps(u.mw, _mm256_set1_ps(x.s[xb]), acc[g][i]);
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

// A pair of adjacent groups' block (16 rows) in 512-bit vectors, as TilePair multiplies it:
// vector t holds the first group's vector t in its low half and the second's in its high half.
struct PairVectors {
  __m512i wv[8];
  __m512 dw, mw;
  __m512i sc_lo, sc_hi;
};

// The pair g0, g0 + 1's block b, unpacked from the packed matrix.
template <GgmlType T>
inline void UnpackPair(const PackedQuantMatrix& w, int64_t g0, int64_t b, int64_t nb,
                       PairVectors* o) {
  constexpr PackedLayout L = LayoutOf(T);
  auto pair = [](__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  };
  auto pairf = [](__m256 lo, __m256 hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
  };
  Unpacked a, c;
  Unpack<T>(w, g0, b, nb, &a);
  Unpack<T>(w, g0 + 1, b, nb, &c);
  for (int t = 0; t < 8; ++t) o->wv[t] = pair(a.wv[t], c.wv[t]);
  o->dw = pairf(a.dw, c.dw);
  if constexpr (L.has_min()) o->mw = pairf(a.mw, c.mw);
  if constexpr (L.scale == Scale::kHalves) {
    o->sc_lo = pair(a.sc_lo, c.sc_lo);
    o->sc_hi = pair(a.sc_hi, c.sc_hi);
  }
}

// A pair's block unpacked once and stored for many tiles (and, its quants, AMX's weight tile:
// 8 rows of 64 bytes).
struct alignas(64) PairBlock {
  uint8_t wv[8 * 64];
  float dw[16];
  float mw[16];
  int32_t sc_lo[16];
  int32_t sc_hi[16];
};

template <GgmlType T>
inline void StorePair(const PairVectors& v, PairBlock* o) {
  constexpr PackedLayout L = LayoutOf(T);
  for (int t = 0; t < 8; ++t) _mm512_store_si512(o->wv + 64 * t, v.wv[t]);
  _mm512_store_ps(o->dw, v.dw);
  if constexpr (L.has_min()) _mm512_store_ps(o->mw, v.mw);
  if constexpr (L.scale == Scale::kHalves) {
    _mm512_store_si512(o->sc_lo, v.sc_lo);
    _mm512_store_si512(o->sc_hi, v.sc_hi);
  }
}

template <GgmlType T>
inline void LoadPair(const PairBlock& p, PairVectors* o) {
  constexpr PackedLayout L = LayoutOf(T);
  for (int t = 0; t < 8; ++t) o->wv[t] = _mm512_load_si512(p.wv + 64 * t);
  o->dw = _mm512_load_ps(p.dw);
  if constexpr (L.has_min()) o->mw = _mm512_load_ps(p.mw);
  if constexpr (L.scale == Scale::kHalves) {
    o->sc_lo = _mm512_load_si512(p.sc_lo);
    o->sc_hi = _mm512_load_si512(p.sc_hi);
  }
}

// From this many activation rows (two 16-row tiles) a pair is unpacked once into PairBlocks
// rather than by each tile.
constexpr int64_t kStoredMinRows = 32;
constexpr int64_t kStoredChunkBytes = 512 << 10;

// This thread's stored pair: grows to the widest matrix, then is reused.
inline PairBlock* PairBuffer(int64_t nb) {
  thread_local std::vector<PairBlock> blocks;
  if (static_cast<int64_t>(blocks.size()) < nb) blocks.resize(nb);
  return blocks.data();
}

// Requests the pair g0, g0 + 1's block b into L1 (for a pair whose weights come from L3 or DRAM).
inline void PrefetchPairBlock(const PackedQuantMatrix& w, int64_t g0, int64_t b, int64_t nb) {
  const char* p = reinterpret_cast<const char*>(w.data.data()) + (g0 * nb + b) * w.block_bytes;
  for (int64_t off = 0; off < w.block_bytes; off += 64) {
    _mm_prefetch(p + off, _MM_HINT_T0);
    _mm_prefetch(p + nb * w.block_bytes + off, _MM_HINT_T0);
  }
}

// The pair g0, g0 + 1 unpacked into blocks[0, nb), the next pair's weights requested meanwhile.
template <GgmlType T>
void StorePairBlocks(const PackedQuantMatrix& w, int64_t g0, int64_t nb, PairBlock* blocks) {
  const bool next = g0 + 4 <= w.groups;
  PairVectors v;
  for (int64_t b = 0; b < nb; ++b) {
    if (next) PrefetchPairBlock(w, g0 + 2, b, nb);
    UnpackPair<T>(w, g0, b, nb, &v);
    StorePair<T>(v, blocks + b);
  }
}

// Where TilePair's weights come from, as src(b, &vectors) for block b: unpacked now from the
// packed matrix (kPrefetch: also requesting the next pair's block, for the first tile of a chunk,
// whose weights come from L3 or DRAM), or loaded from blocks stored once (StorePairBlocks).
template <GgmlType T, bool kPrefetch>
struct UnpackSource {
  const PackedQuantMatrix& w;
  int64_t g0, nb;
  void operator()(int64_t b, PairVectors* v) const {
    if constexpr (kPrefetch) PrefetchPairBlock(w, g0 + 2, b, nb);
    UnpackPair<T>(w, g0, b, nb, v);
  }
};

template <GgmlType T>
struct StoredSource {
  const PairBlock* blocks;
  void operator()(int64_t b, PairVectors* v) const { LoadPair<T>(blocks[b], v); }
};

// Two adjacent groups (16 rows) in 512-bit vectors: every activation broadcast feeds 16 rows'
// dot products, half the instructions per multiply-add of Tile (whose issue rate, not the VNNI
// units, limits it). Per output the operations are Tile's. Writes y[(m0 + i) * ldy + j] for
// the tile's rows i and the pair's rows j in mask.
template <GgmlType T, int MT, typename Src>
void TilePair(const Src& src, const QuantizedActivations& x, int64_t m0, float* y, int64_t ldy,
              __mmask16 mask) {
  constexpr PackedLayout L = LayoutOf(T);
  const int64_t nb = x.cols / kBlock;
  // The tile's rows lie in one panel (RowsPair's tiles never straddle two).
  const int64_t panel = m0 / QuantizedActivations::kPanelRows;
  const int64_t i0 = m0 % QuantizedActivations::kPanelRows;
  __m512 acc[MT];
#pragma GCC unroll 16
  for (int i = 0; i < MT; ++i) acc[i] = _mm512_setzero_ps();
  PairVectors v;
  for (int64_t b = 0; b < nb; ++b) {
    src(b, &v);
    // Block b of the tile's rows in their panel: constant offsets from one slot.
    const int64_t slot = (panel * nb + b) * QuantizedActivations::kPanelRows + i0;
    const int8_t* xq = x.qs.data() + slot * kBlock;
    const float* xd = x.d.data() + slot;
    const float* xs = x.s.data() + slot;
    const int32_t* sq = x.sumq.data() + slot;
    const int32_t* sq_lo = x.sumq_lo.data() + slot;
#pragma GCC unroll 16
    for (int i = 0; i < MT; ++i) {
      const __m512i dot =
          Dot<T, __m512i, Ops512>(v.wv, v.sc_lo, v.sc_hi, sq[i], sq_lo[i], xq + i * kBlock);
      acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dot), v.dw), _mm512_set1_ps(xd[i]),
                               acc[i]);
      if constexpr (L.has_min()) acc[i] = _mm512_fmadd_ps(v.mw, _mm512_set1_ps(xs[i]), acc[i]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MT; ++i) _mm512_mask_storeu_ps(y + (m0 + i) * ldy, mask, acc[i]);
}

// Rows [m_begin, m_end) against one pair, the first 16-row tile's weights from `first` and the
// others' from `src`. y points at the pair's first output column. REQUIRES: m_begin % 16 == 0,
// and x has panels; the tiles (16s, then 8, 4 and the rest) each stay inside one panel.
template <GgmlType T, typename First, typename Src>
void RowsPair(const First& first, const Src& src, const QuantizedActivations& x, int64_t m_begin,
              int64_t m_end, float* y, int64_t ldy, __mmask16 mask) {
  int64_t m = m_begin;
  // 16 activation rows a tile: the pair's weights shared by 16 rows (26 of the 32 registers).
  if (m + 16 <= m_end) {
    TilePair<T, 16>(first, x, m, y, ldy, mask);
    m += 16;
  }
  for (; m + 16 <= m_end; m += 16) TilePair<T, 16>(src, x, m, y, ldy, mask);
  if (m + 8 <= m_end) {
    TilePair<T, 8>(src, x, m, y, ldy, mask);
    m += 8;
  }
  if (m + 4 <= m_end) {
    TilePair<T, 4>(src, x, m, y, ldy, mask);
    m += 4;
  }
  switch (m_end - m) {
    case 3:
      TilePair<T, 3>(src, x, m, y, ldy, mask);
      break;
    case 2:
      TilePair<T, 2>(src, x, m, y, ldy, mask);
      break;
    case 1:
      TilePair<T, 1>(src, x, m, y, ldy, mask);
      break;
    default:
      break;
  }
}

// The output columns of the pair g0, g0 + 1 that exist.
inline __mmask16 PairMask(const PackedQuantMatrix& w, int64_t g0) {
  return static_cast<__mmask16>((1u << std::min<int64_t>(16, w.n_out - g0 * 8)) - 1);
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

// --- AMX (CpuFeatures::amx_int8) ---
// A pair's blocks unpacked once into AMX's weight-tile layout (tile row t = the 16 rows' bytes
// of elements 4t..4t+3: the two groups' vector t side by side), with the blocks' scales; then
// for each 16-row activation panel (its blocks are tiles as they lie, 16 rows x 32 bytes) one
// `tdpbsud` per block gives the 16 x 16 exact int32 dot products, which the epilogue scales and
// accumulates exactly as TilePair does: bit-identical to the VNNI and portable kernels.
constexpr int64_t kAmxMinRows = 128;

struct AmxTileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// Tiles 0, 1: int32 results (16 x 16); 2, 4: activation blocks (16 rows x 32 bytes); 3, 5:
// weight blocks (8 rows x 64 bytes). Two of each so that one block multiplies while the other's
// results are scaled.
__attribute__((target("amx-tile"))) inline void AmxConfigure() {
  AmxTileConfig cfg{};
  cfg.palette_id = 1;
  for (int t : {0, 1}) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  for (int t : {2, 4}) cfg.colsb[t] = 32, cfg.rows[t] = 16;
  for (int t : {3, 5}) cfg.colsb[t] = 64, cfg.rows[t] = 8;
  _tile_loadconfig(&cfg);
}

// acc[i] += the block's contribution for panel row i, from the tile's int32 results in c.
template <GgmlType T>
__attribute__((always_inline)) inline void AmxEpilogue(const int32_t* c, const PairBlock& blk,
                                                       const float* xd, const float* xs,
                                                       const int32_t* sq, __m512* acc) {
  constexpr PackedLayout L = LayoutOf(T);
  const __m512 dw = _mm512_load_ps(blk.dw);
  __m512 mw;
  if constexpr (L.has_min()) mw = _mm512_load_ps(blk.mw);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    __m512i dot = _mm512_load_si512(c + 16 * i);
    if constexpr (L.offset != 0) dot = _mm512_add_epi32(_mm512_set1_epi32(-L.offset * sq[i]), dot);
    acc[i] =
        _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dot), dw), _mm512_set1_ps(xd[i]), acc[i]);
    if constexpr (L.has_min()) acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xs[i]), acc[i]);
  }
}

template <GgmlType T>
__attribute__((target("amx-tile,amx-int8"))) void AmxPair(const PackedQuantMatrix& w, int64_t g0,
                                                          const QuantizedActivations& x,
                                                          PairBlock* blocks, float* y,
                                                          int64_t ldy) {
  constexpr int64_t kP = QuantizedActivations::kPanelRows;
  const int64_t nb = x.cols / kBlock;
  StorePairBlocks<T>(w, g0, nb, blocks);
  const int64_t n0 = g0 * 8;
  const __mmask16 mask = PairMask(w, g0);
  alignas(64) int32_t c0[256], c1[256];
  for (int64_t m0 = 0; m0 < x.rows; m0 += kP) {
    const int64_t panel = m0 / kP;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    auto slot = [&](int64_t b) { return (panel * nb + b) * kP; };
    // Software-pipelined: block b + 2 multiplies on the tile unit while block b's results are
    // scaled on the vector units (tiles are not renamed, so the two result tiles alternate).
    auto issue0 = [&](int64_t b) {
      _tile_zero(0);
      _tile_loadd(2, x.qs.data() + slot(b) * kBlock, kBlock);
      _tile_loadd(3, blocks[b].wv, 64);
      _tile_dpbsud(0, 2, 3);
    };
    auto issue1 = [&](int64_t b) {
      _tile_zero(1);
      _tile_loadd(4, x.qs.data() + slot(b) * kBlock, kBlock);
      _tile_loadd(5, blocks[b].wv, 64);
      _tile_dpbsud(1, 4, 5);
    };
#define PAGELLM_AMX_SCALE(c, b)                                            \
  AmxEpilogue<T>(c, blocks[b], x.d.data() + slot(b), x.s.data() + slot(b), \
                 x.sumq.data() + slot(b), acc)
    if (nb == 1) {
      issue0(0);
      _tile_stored(0, c0, 64);
      PAGELLM_AMX_SCALE(c0, 0);
    } else {
      issue0(0);
      issue1(1);
      int64_t b = 0;
      for (; b + 3 < nb; b += 2) {
        _tile_stored(0, c0, 64);
        issue0(b + 2);
        PAGELLM_AMX_SCALE(c0, b);
        _tile_stored(1, c1, 64);
        issue1(b + 3);
        PAGELLM_AMX_SCALE(c1, b + 1);
      }
      // Blocks b and b + 1 are issued; b + 2 is the last one, if nb - b == 3.
      _tile_stored(0, c0, 64);
      if (b + 2 < nb) issue0(b + 2);
      PAGELLM_AMX_SCALE(c0, b);
      _tile_stored(1, c1, 64);
      PAGELLM_AMX_SCALE(c1, b + 1);
      if (b + 2 < nb) {
        _tile_stored(0, c0, 64);
        PAGELLM_AMX_SCALE(c0, b + 2);
      }
    }
#undef PAGELLM_AMX_SCALE
    const int64_t rows = std::min(kP, x.rows - m0);
    // (Constant indices only, so that acc stays in registers.)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      if (i < rows) _mm512_mask_storeu_ps(y + (m0 + i) * ldy + n0, mask, acc[i]);
    }
  }
}

// This thread's groups on AMX, in pairs (an odd last group on VNNI).
template <GgmlType T>
__attribute__((target("amx-tile,amx-int8"))) void GroupsAmx(const PackedQuantMatrix& w,
                                                            int64_t g_begin, int64_t g_end,
                                                            const QuantizedActivations& x, float* y,
                                                            int64_t ldy) {
  PairBlock* blocks = PairBuffer(x.cols / kBlock);
  AmxConfigure();
  int64_t g = g_begin;
  for (; g + 2 <= g_end; g += 2) AmxPair<T>(w, g, x, blocks, y, ldy);
  _tile_release();
  if (g < g_end) Rows<T, 1>(w, g, x, 0, x.rows, y, ldy);
}

template <GgmlType T>
void Groups(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
            const QuantizedActivations& x, float* y, int64_t ldy) {
  constexpr PackedLayout L = LayoutOf(T);
  if constexpr (L.scale != Scale::kHalves) {  // (Q6_K's per-half scales: VNNI only)
    // AMX from 128 rows: at 64 rows (a decode batch) it measured no faster than VNNI on this
    // machine's shapes, at 512 rows (a prefill chunk) 25% faster; both give the same bits.
    if (x.rows >= kAmxMinRows && GetCpuFeatures().amx_int8) {
      return GroupsAmx<T>(w, g_begin, g_end, x, y, ldy);
    }
  }
  if (!x.has_panels()) {
    // Decode: few activation rows; several groups in flight for instruction-level parallelism.
    int64_t g = g_begin;
    for (; g + 4 <= g_end; g += 4) Rows<T, 4>(w, g, x, 0, x.rows, y, ldy);
    for (; g < g_end; ++g) Rows<T, 1>(w, g, x, 0, x.rows, y, ldy);
    return;
  }
  const int64_t nb = x.cols / kBlock;
  if (x.rows >= kStoredMinRows) {
    // Rows in equal chunks of up to 512 KB (L2). Each pair is unpacked once a chunk into this
    // thread's buffer (L1), which all the chunk's tiles then read: loads in place of the
    // unpacking's shifts, masks and inserts, which compete with the dpbusd for the same ports.
    PairBlock* blocks = PairBuffer(nb);
    const int64_t most = std::max<int64_t>(16, (kStoredChunkBytes / x.cols) / 16 * 16);
    const int64_t chunks = (x.rows + most - 1) / most;
    const int64_t chunk = ((x.rows + chunks - 1) / chunks + 15) / 16 * 16;
    for (int64_t m0 = 0; m0 < x.rows; m0 += chunk) {
      const int64_t m1 = std::min(x.rows, m0 + chunk);
      int64_t g = g_begin;
      for (; g + 2 <= g_end; g += 2) {
        StorePairBlocks<T>(w, g, nb, blocks);
        const StoredSource<T> src{blocks};
        RowsPair<T>(src, src, x, m0, m1, y + g * 8, ldy, PairMask(w, g));
      }
      if (g < g_end) Rows<T, 1>(w, g, x, m0, m1, y, ldy);
    }
    return;
  }
  // Fewer rows: each tile unpacks its pair's blocks as it goes, the rows in chunks that stay in
  // L1 (24 KB) while this thread's weight groups stream past, each chunk reading the weights
  // again (from L2 or L3 the second time) -- unless the weights are too large for the cache (the
  // output projection of a large vocabulary): then the chunks take up to 256 KB (L2), so that
  // the weights come from DRAM fewer times.
  const int64_t weight_bytes = (g_end - g_begin) * nb * w.block_bytes;
  const int64_t chunk_bytes = weight_bytes > (4 << 20) ? (256 << 10) : (24 << 10);
  const int64_t chunk = std::max<int64_t>(16, (chunk_bytes / x.cols) / 16 * 16);
  for (int64_t m0 = 0; m0 < x.rows; m0 += chunk) {
    const int64_t m1 = std::min(x.rows, m0 + chunk);
    int64_t g = g_begin;
    for (; g + 2 <= g_end; g += 2) {
      const UnpackSource<T, false> src{w, g, nb};
      if (g + 4 <= w.groups) {  // the first tile fetches the next pair's weights
        RowsPair<T>(UnpackSource<T, true>{w, g, nb}, src, x, m0, m1, y + g * 8, ldy,
                    PairMask(w, g));
      } else {
        RowsPair<T>(src, src, x, m0, m1, y + g * 8, ldy, PairMask(w, g));
      }
    }
    if (g < g_end) Rows<T, 1>(w, g, x, m0, m1, y, ldy);
  }
}

}  // namespace

void QuantizeRowAvx512(const float* x, int64_t nb, int64_t stride, int8_t* qs, float* ds, float* ss,
                       int32_t* sums, int32_t* sums_lo) {
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t o = b * stride;
    const __m512 lo = _mm512_loadu_ps(x + b * kBlock), hi = _mm512_loadu_ps(x + b * kBlock + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m512i q_lo = _mm512_cvt_roundps_epi32(_mm512_mul_ps(lo, id), kRound);
    const __m512i q_hi = _mm512_cvt_roundps_epi32(_mm512_mul_ps(hi, id), kRound);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + o * kBlock), _mm512_cvtepi32_epi8(q_lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + o * kBlock + 16), _mm512_cvtepi32_epi8(q_hi));
    const int32_t sum_lo = _mm512_reduce_add_epi32(q_lo);
    const int32_t sum = sum_lo + _mm512_reduce_add_epi32(q_hi);
    ds[o] = d;
    ss[o] = d * static_cast<float>(sum);
    sums[o] = sum;
    sums_lo[o] = sum_lo;
  }
}

void QuantMatmulGroupsAvx512(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
                             const QuantizedActivations& x, float* y, int64_t ldy) {
  ForPackedType(w.type,
                [&](auto type) { Groups<decltype(type)::value>(w, g_begin, g_end, x, y, ldy); });
}

}  // namespace pagellm::kernels::internal

#pragma GCC diagnostic pop
