// Integer matrix products for GGML block-quantized weights (Q4_0, Q4_1, Q8_0).
//
// Activations are quantized per row in blocks of 32 to int8 with one fp32 scale (as llama.cpp's
// Q8_0/Q8_1), and each weight block is multiplied with exact int32 dot products (AVX-512 VNNI
// where present). Weight offsets (Q4_0's 8, Q8_0's 128 after the unsigned shift) are removed
// exactly in integer arithmetic; the scales are applied in fp32.
//
// Determinism contract (what batch invariance rests on): y[m][n] depends only on row m of x and
// row n of W, computed with the same sequence of fp32 operations whatever M, N, the tiling, the
// thread count or the code path (the AVX-512 and portable kernels are bit-identical).
#ifndef PAGELLM_KERNELS_CPU_QUANT_MATMUL_H_
#define PAGELLM_KERNELS_CPU_QUANT_MATMUL_H_

#include <cstdint>
#include <vector>

#include "common/ggml_type.h"
#include "kernels/cpu/thread_pool.h"

namespace pagellm::kernels {

// Activations in int8 blocks of 32. Buffers grow on demand and are reused (no allocation once
// they reached the largest batch). Not thread-safe.
struct QuantizedActivations {
  int64_t rows = 0;
  int64_t cols = 0;              // multiple of 32
  std::vector<int8_t> qs;        // [rows][cols]
  std::vector<float> d;          // [rows][cols/32] scale: x ~= d * q
  std::vector<float> s;          // [rows][cols/32] d * sum(q) of the block
  std::vector<int32_t> lanesum;  // [rows][cols/32][8] sum of q[4l..4l+3]
};

// True for the weight types QuantMatmul accepts.
bool IsQuantMatmulType(GgmlType type);

// Quantizes x[rows][cols] (row stride `ldx` floats) into `out`.
// REQUIRES: cols % 32 == 0.
void QuantizeActivations(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         QuantizedActivations* out, ThreadPool* pool);

// y[m][n] = sum_k x[m][k] * W[n][k] for m < x.rows, n < n_out. W is `n_out` rows of x.cols
// elements in GGML `type` blocks, rows contiguous. y has row stride `ldy`.
// REQUIRES: IsQuantMatmulType(type).
void QuantMatmul(GgmlType type, const uint8_t* w, int64_t n_out, const QuantizedActivations& x,
                 float* y, int64_t ldy, ThreadPool* pool);

namespace internal {
// One kernel invocation: rows [n_begin, n_end) of W against all rows of x.
using QuantMatmulRangeFn = void (*)(GgmlType type, const uint8_t* w, int64_t n_begin,
                                    int64_t n_end, const QuantizedActivations& x, float* y,
                                    int64_t ldy);
void QuantMatmulRangePortable(GgmlType type, const uint8_t* w, int64_t n_begin, int64_t n_end,
                              const QuantizedActivations& x, float* y, int64_t ldy);
void QuantMatmulRangeAvx512(GgmlType type, const uint8_t* w, int64_t n_begin, int64_t n_end,
                            const QuantizedActivations& x, float* y, int64_t ldy);
// The fixed reduction shared by both paths: ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)).
inline float ReduceLanes8(const float* a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}
}  // namespace internal

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_QUANT_MATMUL_H_
