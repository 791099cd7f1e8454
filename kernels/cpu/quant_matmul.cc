// Packing, activation quantization, dispatch and the portable kernel. The portable kernel
// performs exactly the fp32 operations of quant_matmul_avx512.cc (see the header's formula);
// only the integer dot products are computed differently, and those are exact.
#include "kernels/cpu/quant_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/quant_layout.h"

namespace pagellm::kernels {
namespace {

constexpr int64_t kBlock = 32;
constexpr int kGroup = 8;

using internal::LayoutOf;
using internal::PackedLayout;
using internal::Scale;

uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One 32-element block of one source row, decoded: unsigned quants and the block's scales.
struct SourceBlock {
  uint8_t u[kBlock];
  uint16_t d = 0, m = 0;                       // kF16, kF16Min: raw fp16
  uint8_t sc = 0, mn = 0;                      // kSubK
  int8_t sc_lo = 0, sc_hi = 0;                 // kHalves
  float super_d = 0.0f, super_negdmin = 0.0f;  // K-quants
};

// Block b (32 elements) of a row of GGML `type` blocks starting at `row`.
void DecodeSource(GgmlType type, const uint8_t* row, int64_t b, SourceBlock* o) {
  const GgmlTypeTraits traits = GetGgmlTypeTraits(type);
  const int64_t per = traits.block_elems / kBlock;  // 32-element blocks per GGML block
  const uint8_t* blk = row + (b / per) * traits.block_bytes;
  const int j = static_cast<int>(b % per);
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1: {
      const bool min = type == GgmlType::kQ4_1;
      o->d = Load16(blk);
      if (min) o->m = Load16(blk + 2);
      const uint8_t* qs = blk + (min ? 4 : 2);
      for (int e = 0; e < 16; ++e) {
        o->u[e] = qs[e] & 0x0F;
        o->u[e + 16] = qs[e] >> 4;
      }
      return;
    }
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1: {  // {d; (m;) u32 qh; qs[16]}: bit e of qh is element e's fifth bit
      const bool min = type == GgmlType::kQ5_1;
      o->d = Load16(blk);
      if (min) o->m = Load16(blk + 2);
      const uint32_t qh = Load32(blk + (min ? 4 : 2));
      const uint8_t* qs = blk + (min ? 8 : 6);
      for (int e = 0; e < 16; ++e) {
        o->u[e] = static_cast<uint8_t>((qs[e] & 0x0F) | (((qh >> e) & 1) << 4));
        o->u[e + 16] = static_cast<uint8_t>((qs[e] >> 4) | (((qh >> (e + 16)) & 1) << 4));
      }
      return;
    }
    case GgmlType::kQ8_0:
      o->d = Load16(blk);
      for (int e = 0; e < kBlock; ++e) o->u[e] = blk[2 + e] ^ 0x80;
      return;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {  // {d; dmin; scales[12]; (qh[32];) qs[128]}
      const bool five = type == GgmlType::kQ5_K;
      o->super_d = HalfToFloat(Load16(blk));
      o->super_negdmin = -HalfToFloat(Load16(blk + 2));
      int sc, mn;
      KQuantScaleMin(j, blk + 4, &sc, &mn);
      o->sc = static_cast<uint8_t>(sc);
      o->mn = static_cast<uint8_t>(mn);
      const uint8_t* qh = blk + 16;
      const uint8_t* ql = blk + (five ? 48 : 16) + 32 * (j / 2);
      for (int e = 0; e < kBlock; ++e) {
        int u = (j % 2 == 0) ? (ql[e] & 0x0F) : (ql[e] >> 4);
        if (five) u |= ((qh[e] >> j) & 1) << 4;
        o->u[e] = static_cast<uint8_t>(u);
      }
      return;
    }
    case GgmlType::kQ6_K: {  // {ql[128]; qh[64]; i8 scales[16]; d}: element E's scale is E / 16
      const uint8_t* ql = blk;
      const uint8_t* qh = blk + 128;
      const auto* scales = reinterpret_cast<const int8_t*>(blk + 192);
      o->super_d = HalfToFloat(Load16(blk + 208));
      o->sc_lo = scales[2 * j];
      o->sc_hi = scales[2 * j + 1];
      const int n = j / 4, quarter = j % 4;
      for (int e = 0; e < kBlock; ++e) {
        const int lo = (ql[n * 64 + e + 32 * (quarter & 1)] >> (4 * (quarter >> 1))) & 0x0F;
        const int hi = (qh[n * 32 + e] >> (2 * quarter)) & 3;
        o->u[e] = static_cast<uint8_t>(lo | (hi << 4));
      }
      return;
    }
    case GgmlType::kQ8_K: {  // {f32 d; i8 qs[256]; i16 bsums[16]}
      std::memcpy(&o->super_d, blk, 4);
      for (int e = 0; e < kBlock; ++e) o->u[e] = blk[4 + kBlock * j + e] ^ 0x80;
      return;
    }
    default:
      return;
  }
}

// Unsigned quant of row r (0..7), element e of a packed group-block (quant_layout.h).
uint8_t PackedQuant(const uint8_t* gb, const PackedLayout& l, int r, int e) {
  const uint8_t* q = gb + l.scale_bytes;
  const int t = e / 4, i = e % 4;
  if (l.bits == 8) return q[t * 32 + 4 * r + i];
  int u = t < 4 ? (q[t * 32 + 4 * r + i] & 0x0F) : (q[(t - 4) * 32 + 4 * r + i] >> 4);
  if (l.bits == 5) u |= ((q[128 + 4 * r + i] >> t) & 1) << 4;
  if (l.bits == 6) u |= ((q[128 + 32 * (t / 4) + 4 * r + i] >> (2 * (t % 4))) & 3) << 4;
  return static_cast<uint8_t>(u);
}

}  // namespace

bool IsQuantMatmulType(GgmlType type) { return LayoutOf(type).ok; }

absl::StatusOr<PackedQuantMatrix> PackQuantMatrix(
    GgmlType type, const uint8_t* blocks, int64_t n_out, int64_t n_in,
    const std::function<void(int64_t rows_done)>& rows_done) {
  const PackedLayout l = LayoutOf(type);
  const GgmlTypeTraits traits = GetGgmlTypeTraits(type);
  if (!l.ok || n_out <= 0 || n_in <= 0 || n_in % traits.block_elems != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot pack a ", n_out, "x", n_in,
                                                   " matrix of type ", static_cast<int>(type)));
  }
  PackedQuantMatrix p;
  p.type = type;
  p.n_out = n_out;
  p.n_in = n_in;
  p.groups = (n_out + kGroup - 1) / kGroup;
  p.block_bytes = l.block_bytes();
  const int64_t nb = n_in / kBlock;
  const int64_t row_bytes = n_in / traits.block_elems * traits.block_bytes;
  p.data.assign(p.groups * nb * p.block_bytes, 0);  // padding rows: scales 0, quants 0
  p.super.assign(p.groups * (nb / 8) * l.super_floats, 0.0f);
  SourceBlock src;
  for (int64_t g = 0; g < p.groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* gb = p.data.data() + (g * nb + b) * p.block_bytes;
      uint8_t* q = gb + l.scale_bytes;
      for (int r = 0; r < kGroup; ++r) {
        const int64_t row = g * kGroup + r;
        if (row >= n_out) continue;
        DecodeSource(type, blocks + row * row_bytes, b, &src);
        switch (l.scale) {
          case Scale::kF16Min:
            std::memcpy(gb + 16 + 2 * r, &src.m, 2);
            [[fallthrough]];
          case Scale::kF16:
            std::memcpy(gb + 2 * r, &src.d, 2);
            break;
          case Scale::kSubK:
            gb[r] = src.sc;
            gb[8 + r] = src.mn;
            break;
          case Scale::kHalves:
            gb[r] = static_cast<uint8_t>(src.sc_lo);
            gb[8 + r] = static_cast<uint8_t>(src.sc_hi);
            break;
          case Scale::kSuper:
            break;
        }
        if (l.super_floats > 0 && b % 8 == 0) {
          float* sup = p.super.data() + (g * (nb / 8) + b / 8) * l.super_floats;
          sup[r] = src.super_d;
          if (l.super_floats == 16) sup[8 + r] = src.super_negdmin;
        }
        for (int e = 0; e < kBlock; ++e) {
          const uint8_t u = src.u[e];
          const int t = e / 4, i = e % 4;
          if (l.bits == 8) {
            q[t * 32 + 4 * r + i] = u;
            continue;
          }
          if (t < 4) {
            q[t * 32 + 4 * r + i] |= u & 0x0F;
          } else {
            q[(t - 4) * 32 + 4 * r + i] |= static_cast<uint8_t>((u & 0x0F) << 4);
          }
          if (l.bits == 5) q[128 + 4 * r + i] |= static_cast<uint8_t>(((u >> 4) & 1) << t);
          if (l.bits == 6) {
            q[128 + 32 * (t / 4) + 4 * r + i] |=
                static_cast<uint8_t>(((u >> 4) & 3) << (2 * (t % 4)));
          }
        }
      }
    }
    constexpr int64_t kReportGroups = 256;  // every 2048 rows
    if (rows_done && ((g + 1) % kReportGroups == 0 || g + 1 == p.groups)) {
      rows_done(std::min(n_out, (g + 1) * kGroup));
    }
  }
  return p;
}

void DequantizePackedRow(const PackedQuantMatrix& w, int64_t row, float* out) {
  const PackedLayout l = LayoutOf(w.type);
  const int64_t nb = w.n_in / kBlock, g = row / kGroup;
  const int r = static_cast<int>(row % kGroup);
  for (int64_t b = 0; b < nb; ++b, out += kBlock) {
    const uint8_t* gb = w.data.data() + (g * nb + b) * w.block_bytes;
    const float* sup = l.super_floats > 0 ? SuperOf(w.super.data(), l, g, b, nb) : nullptr;
    // The same fp32 operations as dequant.cc: q * d (+ m); (d * sc) * q - dmin * mn, where
    // adding -(dmin * mn) is that subtraction; (d * sc) * q.
    switch (l.scale) {
      case Scale::kF16:
      case Scale::kSuper: {
        const float d = l.scale == Scale::kF16 ? HalfToFloat(Load16(gb + 2 * r)) : sup[r];
        for (int e = 0; e < kBlock; ++e) {
          out[e] = static_cast<float>(PackedQuant(gb, l, r, e) - l.offset) * d;
        }
        break;
      }
      case Scale::kF16Min: {
        const float d = HalfToFloat(Load16(gb + 2 * r)), m = HalfToFloat(Load16(gb + 16 + 2 * r));
        for (int e = 0; e < kBlock; ++e)
          out[e] = static_cast<float>(PackedQuant(gb, l, r, e)) * d + m;
        break;
      }
      case Scale::kSubK: {
        const float dl = sup[r] * static_cast<float>(gb[r]);
        const float ml = sup[8 + r] * static_cast<float>(gb[8 + r]);
        for (int e = 0; e < kBlock; ++e)
          out[e] = dl * static_cast<float>(PackedQuant(gb, l, r, e)) + ml;
        break;
      }
      case Scale::kHalves:
        for (int e = 0; e < kBlock; ++e) {
          const auto sc = static_cast<int8_t>(gb[e < kBlock / 2 ? r : 8 + r]);
          out[e] = sup[r] * static_cast<float>(sc) *
                   static_cast<float>(PackedQuant(gb, l, r, e) - l.offset);
        }
        break;
    }
  }
}

void ResizeActivations(int64_t rows, int64_t cols, QuantizedActivations* out) {
  constexpr int64_t kP = QuantizedActivations::kPanelRows;
  out->rows = rows;
  out->cols = cols;
  const int64_t slots = (out->has_panels() ? (rows + kP - 1) / kP * kP : rows) * (cols / kBlock);
  if (static_cast<int64_t>(out->qs.size()) < slots * kBlock) out->qs.resize(slots * kBlock);
  if (static_cast<int64_t>(out->d.size()) < slots) {
    out->d.resize(slots);
    out->s.resize(slots);
    out->sumq.resize(slots);
    out->sumq_lo.resize(slots);
  }
}

void QuantizeActivationRows(const float* x, int64_t r0, int64_t r1, int64_t ldx,
                            QuantizedActivations* out) {
  const int64_t nb = out->cols / kBlock;
  const CpuFeatures& f = GetCpuFeatures();
  const auto row_fn = f.avx512 ? internal::QuantizeRowAvx512
                      : f.avx2 ? internal::QuantizeRowAvx2
                               : internal::QuantizeRowPortable;
  // A row's blocks are consecutive slots, or in its panel 16 slots apart.
  const int64_t stride = out->has_panels() ? QuantizedActivations::kPanelRows : 1;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t slot = out->Slot(r, 0);
    row_fn(x + r * ldx, nb, stride, out->qs.data() + slot * kBlock, out->d.data() + slot,
           out->s.data() + slot, out->sumq.data() + slot, out->sumq_lo.data() + slot);
  }
}

void QuantizeActivations(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         QuantizedActivations* out, ThreadPool* pool) {
  ResizeActivations(rows, cols, out);
  auto quantize_rows = [&](int64_t begin, int64_t end, int) {
    QuantizeActivationRows(x, begin, end, ldx, out);
  };
  if (pool != nullptr && rows * cols >= 16384) {
    pool->ParallelFor(rows, quantize_rows);
  } else {
    quantize_rows(0, rows, 0);
  }
}

namespace internal {

void QuantizeRowPortable(const float* x, int64_t nb, int64_t stride, int8_t* qs, float* ds,
                         float* ss, int32_t* sums, int32_t* sums_lo) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* src = x + b * kBlock;
    const int64_t o = b * stride;
    float amax = 0.0f;
    for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(src[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0, sum_lo = 0;
    for (int i = 0; i < kBlock; ++i) {
      const auto q = static_cast<int32_t>(std::nearbyint(src[i] * id));
      qs[o * kBlock + i] = static_cast<int8_t>(q);
      sum += q;
      if (i == kBlock / 2 - 1) sum_lo = sum;
    }
    ds[o] = d;
    ss[o] = d * static_cast<float>(sum);
    sums[o] = sum;
    sums_lo[o] = sum_lo;
  }
}

void QuantMatmulGroupsPortable(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
                               const QuantizedActivations& x, float* y, int64_t ldy) {
  const PackedLayout l = LayoutOf(w.type);
  const int64_t nb = x.cols / kBlock;
  for (int64_t g = g_begin; g < g_end; ++g) {
    for (int r = 0; r < kGroup; ++r) {
      const int64_t n = g * kGroup + r;
      if (n >= w.n_out) break;
      for (int64_t m = 0; m < x.rows; ++m) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* gb = w.data.data() + (g * nb + b) * w.block_bytes;
          const int64_t xb = x.Slot(m, b);
          const int8_t* q = x.qs.data() + xb * kBlock;
          int32_t lo = 0, hi = 0;  // the halves' dot products of the unsigned quants
          for (int e = 0; e < kBlock / 2; ++e) lo += PackedQuant(gb, l, r, e) * q[e];
          for (int e = kBlock / 2; e < kBlock; ++e) hi += PackedQuant(gb, l, r, e) * q[e];
          const int32_t sq = x.sumq[xb], sq_lo = x.sumq_lo[xb];
          const float* sup = l.super_floats > 0 ? SuperOf(w.super.data(), l, g, b, nb) : nullptr;
          int32_t dot = lo + hi - l.offset * sq;
          float dw = 0.0f, mw = 0.0f;
          switch (l.scale) {
            case Scale::kF16Min:
              mw = HalfToFloat(Load16(gb + 16 + 2 * r));
              [[fallthrough]];
            case Scale::kF16:
              dw = HalfToFloat(Load16(gb + 2 * r));
              break;
            case Scale::kSubK:
              dw = sup[r] * static_cast<float>(gb[r]);
              mw = sup[8 + r] * static_cast<float>(gb[8 + r]);
              break;
            case Scale::kHalves:
              dot = static_cast<int8_t>(gb[r]) * (lo - l.offset * sq_lo) +
                    static_cast<int8_t>(gb[8 + r]) * (hi - l.offset * (sq - sq_lo));
              dw = sup[r];
              break;
            case Scale::kSuper:
              dw = sup[r];
              break;
          }
          acc = std::fma(static_cast<float>(dot) * dw, x.d[xb], acc);
          if (l.has_min()) acc = std::fma(mw, x.s[xb], acc);
        }
        y[m * ldy + n] = acc;
      }
    }
  }
}

}  // namespace internal

namespace {
using GroupsFn = void (*)(const PackedQuantMatrix&, int64_t, int64_t, const QuantizedActivations&,
                          float*, int64_t);
GroupsFn Kernel() {
  const CpuFeatures& f = GetCpuFeatures();
  return f.avx512 ? internal::QuantMatmulGroupsAvx512
         : f.avx2 ? internal::QuantMatmulGroupsAvx2
                  : internal::QuantMatmulGroupsPortable;
}
}  // namespace

void QuantMatmul(const PackedQuantMatrix& w, const QuantizedActivations& x, float* y, int64_t ldy,
                 ThreadPool* pool) {
  const QuantMatmulJob job{&w, y, ldy};
  QuantMatmulMany(&job, 1, x, pool);
}

void QuantMatmulMany(const QuantMatmulJob* jobs, int num_jobs, const QuantizedActivations& x,
                     ThreadPool* pool) {
  const GroupsFn fn = Kernel();
  int64_t total = 0;
  for (int j = 0; j < num_jobs; ++j) total += jobs[j].w->groups;
  // Chunk [begin, end) of the jobs' groups laid end to end.
  auto run = [&](int64_t begin, int64_t end, int) {
    ForEachJobRange(
        num_jobs, [&](int j) { return jobs[j].w->groups; }, begin, end,
        [&](int j, int64_t lo, int64_t hi) { fn(*jobs[j].w, lo, hi, x, jobs[j].y, jobs[j].ldy); });
  };
  if (pool != nullptr) {
    pool->ParallelFor(total, run);
  } else {
    run(0, total, 0);
  }
}

}  // namespace pagellm::kernels
