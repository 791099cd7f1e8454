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

namespace pagellm::kernels {
namespace {

constexpr int64_t kBlock = 32;
constexpr int kGroup = 8;

uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Geometry of a type's GGML block and of its packed group-block.
struct Layout {
  int64_t src_bytes;  // GGML block
  int64_t qs_offset;  // quants inside the GGML block
  bool has_min;
  bool nibbles;
  int64_t scale_bytes;  // packed: d[8] (+ m[8]) fp16
  int64_t quant_bytes;  // packed: 128 (Q4) or 256 (Q8)
};

Layout GetLayout(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return {18, 2, false, true, 16, 128};
    case GgmlType::kQ4_1:
      return {20, 4, true, true, 32, 128};
    default:
      return {34, 2, false, false, 16, 256};  // Q8_0
  }
}

// Unsigned quant of element e (0..31) of a GGML block.
uint8_t SourceQuant(const uint8_t* blk, const Layout& l, int e) {
  const uint8_t* qs = blk + l.qs_offset;
  if (!l.nibbles) return static_cast<uint8_t>(qs[e] ^ 0x80);
  return e < 16 ? (qs[e] & 0x0F) : (qs[e - 16] >> 4);
}

// Unsigned quant of row r (0..7), element e of a packed group-block.
uint8_t PackedQuant(const uint8_t* gb, const Layout& l, int r, int e) {
  const uint8_t* q = gb + l.scale_bytes;
  const int t = e / 4, i = e % 4;
  if (!l.nibbles) return q[t * 32 + 4 * r + i];
  if (t < 4) return q[t * 32 + 4 * r + i] & 0x0F;
  return q[(t - 4) * 32 + 4 * r + i] >> 4;
}

// One row of activations to int8 blocks. The clones compute identical results (exact IEEE
// operations only; nearbyint rounds half to even in both).
__attribute__((target_clones("avx512f", "default"))) void QuantizeRow(const float* x, int64_t nb,
                                                                      int8_t* qs, float* ds,
                                                                      float* ss, int32_t* sums) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* src = x + b * kBlock;
    float amax = 0.0f;
    for (int i = 0; i < kBlock; ++i) {
      const float a = src[i] < 0.0f ? -src[i] : src[i];
      amax = a > amax ? a : amax;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t vals[kBlock];
    for (int i = 0; i < kBlock; ++i) vals[i] = static_cast<int32_t>(std::nearbyint(src[i] * id));
    int32_t sum = 0;
    for (int i = 0; i < kBlock; ++i) {
      qs[b * kBlock + i] = static_cast<int8_t>(vals[i]);
      sum += vals[i];
    }
    ds[b] = d;
    ss[b] = d * static_cast<float>(sum);
    sums[b] = sum;
  }
}

}  // namespace

bool IsQuantMatmulType(GgmlType type) {
  return type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || type == GgmlType::kQ8_0;
}

absl::StatusOr<PackedQuantMatrix> PackQuantMatrix(GgmlType type, const uint8_t* blocks,
                                                  int64_t n_out, int64_t n_in) {
  if (!IsQuantMatmulType(type) || n_in % kBlock != 0 || n_out <= 0 || n_in <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot pack a ", n_out, "x", n_in,
                                                   " matrix of type ", static_cast<int>(type)));
  }
  const Layout l = GetLayout(type);
  PackedQuantMatrix p;
  p.type = type;
  p.n_out = n_out;
  p.n_in = n_in;
  p.groups = (n_out + kGroup - 1) / kGroup;
  p.block_bytes = l.scale_bytes + l.quant_bytes;
  const int64_t nb = n_in / kBlock;
  p.data.assign(p.groups * nb * p.block_bytes, 0);
  for (int64_t g = 0; g < p.groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* gb = p.data.data() + (g * nb + b) * p.block_bytes;
      uint8_t* q = gb + l.scale_bytes;
      for (int r = 0; r < kGroup; ++r) {
        const int64_t row = g * kGroup + r;
        if (row >= n_out) continue;  // zero padding: scale 0, quants 0
        const uint8_t* blk = blocks + (row * nb + b) * l.src_bytes;
        std::memcpy(gb + 2 * r, blk, 2);                          // d
        if (l.has_min) std::memcpy(gb + 16 + 2 * r, blk + 2, 2);  // m
        for (int e = 0; e < kBlock; ++e) {
          const uint8_t u = SourceQuant(blk, l, e);
          const int t = e / 4, i = e % 4;
          if (!l.nibbles) {
            q[t * 32 + 4 * r + i] = u;
          } else if (t < 4) {
            q[t * 32 + 4 * r + i] |= u;
          } else {
            q[(t - 4) * 32 + 4 * r + i] |= static_cast<uint8_t>(u << 4);
          }
        }
      }
    }
  }
  return p;
}

void QuantizeActivations(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         QuantizedActivations* out, ThreadPool* pool) {
  const int64_t nb = cols / kBlock;
  out->rows = rows;
  out->cols = cols;
  if (static_cast<int64_t>(out->qs.size()) < rows * cols) out->qs.resize(rows * cols);
  if (static_cast<int64_t>(out->d.size()) < rows * nb) {
    out->d.resize(rows * nb);
    out->s.resize(rows * nb);
    out->sumq.resize(rows * nb);
  }
  auto quantize_rows = [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      QuantizeRow(x + r * ldx, nb, out->qs.data() + r * cols, out->d.data() + r * nb,
                  out->s.data() + r * nb, out->sumq.data() + r * nb);
    }
  };
  if (pool != nullptr && rows * cols >= 16384) {
    pool->ParallelFor(rows, quantize_rows);
  } else {
    quantize_rows(0, rows, 0);
  }
}

namespace internal {

void QuantMatmulGroupsPortable(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
                               const QuantizedActivations& x, float* y, int64_t ldy) {
  const Layout l = GetLayout(w.type);
  const int offset = QuantOffset(w.type);
  const int64_t nb = x.cols / kBlock;
  for (int64_t g = g_begin; g < g_end; ++g) {
    for (int r = 0; r < kGroup; ++r) {
      const int64_t n = g * kGroup + r;
      if (n >= w.n_out) break;
      for (int64_t m = 0; m < x.rows; ++m) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* gb = w.data.data() + (g * nb + b) * w.block_bytes;
          const int8_t* q = x.qs.data() + m * x.cols + b * kBlock;
          int32_t dot = -offset * x.sumq[m * nb + b];
          for (int e = 0; e < kBlock; ++e)
            dot += static_cast<int32_t>(PackedQuant(gb, l, r, e)) * q[e];
          acc = std::fma(static_cast<float>(dot) * HalfToFloat(Load16(gb + 2 * r)), x.d[m * nb + b],
                         acc);
          if (l.has_min) acc = std::fma(HalfToFloat(Load16(gb + 16 + 2 * r)), x.s[m * nb + b], acc);
        }
        y[m * ldy + n] = acc;
      }
    }
  }
}

}  // namespace internal

void QuantMatmul(const PackedQuantMatrix& w, const QuantizedActivations& x, float* y, int64_t ldy,
                 ThreadPool* pool) {
  auto fn = GetCpuFeatures().avx512 ? internal::QuantMatmulGroupsAvx512
                                    : internal::QuantMatmulGroupsPortable;
  auto run = [&](int64_t begin, int64_t end, int) { fn(w, begin, end, x, y, ldy); };
  if (pool != nullptr) {
    pool->ParallelFor(w.groups, run);
  } else {
    run(0, w.groups, 0);
  }
}

}  // namespace pagellm::kernels
