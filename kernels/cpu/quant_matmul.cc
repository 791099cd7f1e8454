// Dispatch, activation quantization and the portable kernel. The portable kernel performs the
// same fp32 operations in the same order as quant_matmul_avx512.cc: per block, 8 int32 lane
// sums (lane l covers elements 4l..4l+3 of the 32, in the weight's storage order), each lane
// accumulated as acc = fma(float(dot) * dw, dx, acc); then ReduceLanes8 + the Q4_1 min term.
#include "kernels/cpu/quant_matmul.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequant.h"

namespace pagellm::kernels {
namespace {

constexpr int64_t kBlock = 32;

struct Format {
  int64_t block_bytes;
  int offset;     // subtracted from the unsigned weight value
  bool has_min;   // Q4_1
  bool nibbles;   // 4-bit packed
};

Format GetFormat(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return {18, 8, false, true};
    case GgmlType::kQ4_1: return {20, 0, true, true};
    default: return {34, 128, false, false};  // Q8_0
  }
}

uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Unsigned weight values of one block in storage order (see the design note above).
void UnpackBlock(const uint8_t* blk, const Format& f, uint8_t* u) {
  const uint8_t* qs = blk + (f.has_min ? 4 : 2);
  if (f.nibbles) {
    for (int i = 0; i < 16; ++i) {
      u[i] = qs[i] & 0x0F;
      u[i + 16] = qs[i] >> 4;
    }
  } else {
    for (int i = 0; i < 32; ++i) u[i] = static_cast<uint8_t>(qs[i] ^ 0x80);
  }
}

}  // namespace

bool IsQuantMatmulType(GgmlType type) {
  return type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || type == GgmlType::kQ8_0;
}

void QuantizeActivations(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         QuantizedActivations* out, ThreadPool* pool) {
  const int64_t nb = cols / kBlock;
  out->rows = rows;
  out->cols = cols;
  if (static_cast<int64_t>(out->qs.size()) < rows * cols) {
    out->qs.resize(rows * cols);
    out->d.resize(rows * nb);
    out->s.resize(rows * nb);
    out->lanesum.resize(rows * nb * 8);
  }
  auto quantize_rows = [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t b = 0; b < nb; ++b) {
        const float* src = x + r * ldx + b * kBlock;
        float amax = 0.0f;
        for (int i = 0; i < kBlock; ++i) amax = std::fmax(amax, std::fabs(src[i]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int8_t* q = out->qs.data() + r * cols + b * kBlock;
        int32_t* ls = out->lanesum.data() + (r * nb + b) * 8;
        int32_t sum = 0;
        for (int l = 0; l < 8; ++l) ls[l] = 0;
        for (int i = 0; i < kBlock; ++i) {
          const int v = static_cast<int>(std::nearbyint(src[i] * id));
          q[i] = static_cast<int8_t>(v);
          sum += v;
          ls[i / 4] += v;
        }
        out->d[r * nb + b] = d;
        out->s[r * nb + b] = d * static_cast<float>(sum);
      }
    }
  };
  if (pool != nullptr && rows * cols >= 16384) {
    pool->ParallelFor(rows, quantize_rows);
  } else {
    quantize_rows(0, rows, 0);
  }
}

namespace internal {

void QuantMatmulRangePortable(GgmlType type, const uint8_t* w, int64_t n_begin, int64_t n_end,
                              const QuantizedActivations& x, float* y, int64_t ldy) {
  const Format f = GetFormat(type);
  const int64_t nb = x.cols / kBlock;
  const int64_t row_bytes = nb * f.block_bytes;
  uint8_t u[kBlock];
  for (int64_t n = n_begin; n < n_end; ++n) {
    const uint8_t* wrow = w + n * row_bytes;
    for (int64_t m = 0; m < x.rows; ++m) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      float macc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = wrow + b * f.block_bytes;
        UnpackBlock(blk, f, u);
        const float dw = HalfToFloat(Load16(blk));
        const int8_t* q = x.qs.data() + m * x.cols + b * kBlock;
        const int32_t* ls = x.lanesum.data() + (m * nb + b) * 8;
        const float dx = x.d[m * nb + b];
        for (int l = 0; l < 8; ++l) {
          int32_t dot = -f.offset * ls[l];
          for (int i = 0; i < 4; ++i) dot += static_cast<int32_t>(u[4 * l + i]) * q[4 * l + i];
          acc[l] = std::fma(static_cast<float>(dot) * dw, dx, acc[l]);
        }
        if (f.has_min) macc = std::fma(HalfToFloat(Load16(blk + 2)), x.s[m * nb + b], macc);
      }
      y[m * ldy + n] = ReduceLanes8(acc) + macc;
    }
  }
}

}  // namespace internal

void QuantMatmul(GgmlType type, const uint8_t* w, int64_t n_out, const QuantizedActivations& x,
                 float* y, int64_t ldy, ThreadPool* pool) {
  internal::QuantMatmulRangeFn fn = GetCpuFeatures().avx512
                                        ? internal::QuantMatmulRangeAvx512
                                        : internal::QuantMatmulRangePortable;
  // Tasks are groups of 16 output rows so that each thread's range stays tile-aligned.
  constexpr int64_t kRowsPerTask = 16;
  const int64_t tasks = (n_out + kRowsPerTask - 1) / kRowsPerTask;
  auto run = [&](int64_t begin, int64_t end, int) {
    fn(type, w, begin * kRowsPerTask, std::min(end * kRowsPerTask, n_out), x, y, ldy);
  };
  if (pool != nullptr) {
    pool->ParallelFor(tasks, run);
  } else {
    run(0, tasks, 0);
  }
}

}  // namespace pagellm::kernels
