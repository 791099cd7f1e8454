// Integer matrix products for GGML block-quantized weights (Q4_0, Q4_1, Q8_0).
//
// Weights are repacked once at load (PackQuantMatrix) into groups of 8 output rows. For each
// group and each 32-element block the packed data hold the 8 rows' fp16 scales (and Q4_1
// mins), then the quants interleaved so that int32 lane r of a VNNI dot product belongs to row
// r: vector t (t = 0..7) holds, at bytes 4r..4r+3, row r's unsigned quants of elements
// 4t..4t+3 (Q4: vectors t and t+4 share 32 bytes as low / high nibbles). One activation
// broadcast then feeds 8 rows at once.
//
// Activations are quantized per row in blocks of 32 to int8 with one fp32 scale (as llama.cpp's
// Q8_0/Q8_1). Per block, each row's dot product is exact in int32, weight offsets (Q4_0's 8,
// Q8_0's 128 after the unsigned shift) are removed exactly in integer arithmetic, and then
//   acc = fma(float(dot) * d_w, d_x, acc);   Q4_1 also: acc = fma(min_w, d_x * sum(q_x), acc)
// sequentially over blocks.
//
// Determinism contract (what batch invariance rests on): y[m][n] depends only on row m of x and
// row n of W, through the same fp32 operations whatever M, N, the tiling, the thread count or
// the code path (the AVX-512 and portable kernels are bit-identical).
#ifndef PAGELLM_KERNELS_CPU_QUANT_MATMUL_H_
#define PAGELLM_KERNELS_CPU_QUANT_MATMUL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ggml_type.h"
#include "kernels/cpu/thread_pool.h"

namespace pagellm::kernels {

// Activations in int8 blocks of 32. Buffers grow on demand and are reused (no allocation once
// they reached the largest batch). Not thread-safe.
struct QuantizedActivations {
  int64_t rows = 0;
  int64_t cols = 0;           // multiple of 32
  std::vector<int8_t> qs;     // [rows][cols]
  std::vector<float> d;       // [rows][cols/32] scale: x ~= d * q
  std::vector<float> s;       // [rows][cols/32] d * sum(q) of the block
  std::vector<int32_t> sumq;  // [rows][cols/32] sum(q) of the block
};

// A weight matrix repacked for the kernels (see the file comment). Immutable once built.
struct PackedQuantMatrix {
  GgmlType type = GgmlType::kQ4_0;
  int64_t n_out = 0;
  int64_t n_in = 0;
  int64_t groups = 0;         // ceil(n_out / 8); rows past n_out are zero padding
  int64_t block_bytes = 0;    // per group and block
  std::vector<uint8_t> data;  // [groups][n_in / 32][block_bytes]
};

// True for the weight types QuantMatmul accepts.
bool IsQuantMatmulType(GgmlType type);

// Repacks `n_out` rows of `n_in` elements in GGML `type` blocks (rows contiguous).
// InvalidArgument for another type or n_in not a multiple of 32.
absl::StatusOr<PackedQuantMatrix> PackQuantMatrix(GgmlType type, const uint8_t* blocks,
                                                  int64_t n_out, int64_t n_in);

// Quantizes x[rows][cols] (row stride `ldx` floats) into `out`.
// REQUIRES: cols % 32 == 0.
void QuantizeActivations(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         QuantizedActivations* out, ThreadPool* pool);

// y[m][n] = sum_k x[m][k] * W[n][k] for m < x.rows, n < w.n_out; y has row stride `ldy`.
// REQUIRES: x.cols == w.n_in.
void QuantMatmul(const PackedQuantMatrix& w, const QuantizedActivations& x, float* y, int64_t ldy,
                 ThreadPool* pool);

namespace internal {
// One kernel invocation: row groups [g_begin, g_end) of W against all rows of x.
void QuantMatmulGroupsPortable(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
                               const QuantizedActivations& x, float* y, int64_t ldy);
void QuantMatmulGroupsAvx512(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
                             const QuantizedActivations& x, float* y, int64_t ldy);
// Weight offset subtracted from the unsigned packed quants, and whether mins are present.
inline int QuantOffset(GgmlType t) {
  return t == GgmlType::kQ4_0 ? 8 : t == GgmlType::kQ8_0 ? 128 : 0;
}
}  // namespace internal

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_QUANT_MATMUL_H_
