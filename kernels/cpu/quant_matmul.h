// Integer matrix products for GGML block-quantized weights: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and
// the K-quants Q4_K, Q5_K, Q6_K, Q8_K.
//
// Weights are repacked once at load (PackQuantMatrix) into groups of 8 output rows and blocks of
// 32 input elements, quants unsigned and interleaved so that one activation broadcast feeds 8
// rows of a VNNI dot product; quant_layout.h gives each type's layout. The packed matrix takes
// about the GGML size (4.5 bits per Q4_0 weight as in the file, 4.75 per Q4_K against 4.5, 6.63
// per Q6_K against 6.56), so a caller can release the source afterwards.
//
// Activations are quantized per row in blocks of 32 to int8 with one fp32 scale (as llama.cpp's
// Q8_0/Q8_1). Per block, each row's dot product is exact in int32, weight offsets (Q4_0's 8,
// Q5_0's 16, Q6_K's 32, Q8_0's 128 after the unsigned shift) are removed exactly in integer
// arithmetic (Q6_K's two 16-element halves are scaled by their int8 scales there too), and then
//   acc = fma(float(dot) * d_w, d_x, acc);   with mins also: acc = fma(m_w, d_x * sum(q_x), acc)
// sequentially over blocks, where d_w and m_w are the block's fp32 scale and min (for K-quants
// the exact products d * sc and -dmin * m).
//
// Determinism contract (what batch invariance rests on): y[m][n] depends only on row m of x and
// row n of W, through the same fp32 operations whatever M, N, the tiling, the thread count or
// the code path (the AVX-512, AVX2 and portable kernels are bit-identical).
#ifndef PAGELLM_KERNELS_CPU_QUANT_MATMUL_H_
#define PAGELLM_KERNELS_CPU_QUANT_MATMUL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ggml_type.h"
#include "kernels/cpu/thread_pool.h"

namespace pagellm::kernels {

// Activations in int8 blocks of 32. Buffers grow on demand and are reused (no allocation once
// they reached the largest batch). Not thread-safe.
//
// Block b of row m is at slot Slot(m, b): its quants at qs[slot * 32], its scalars at d[slot],
// s[slot], sumq[slot] and sumq_lo[slot]. Up to kPanelMinRows rows the slots are row-major
// (m * cols/32 + b). With more, the rows lie in panels of kPanelRows rows, block-major (what the
// multi-row kernel reads: one pointer and constant offsets reach a block of all the rows of its
// tile): with P = m / 16 and i = m % 16, slot (P * cols/32 + b) * 16 + i. Slots of rows past
// `rows` are unspecified.
struct QuantizedActivations {
  static constexpr int64_t kPanelRows = 16;
  static constexpr int64_t kPanelMinRows = 2;
  int64_t rows = 0;
  int64_t cols = 0;              // multiple of 32
  std::vector<int8_t> qs;        // [slots][32]
  std::vector<float> d;          // [slots] scale: x ~= d * q
  std::vector<float> s;          // [slots] d * sum(q) of the block
  std::vector<int32_t> sumq;     // [slots] sum(q) of the block
  std::vector<int32_t> sumq_lo;  // [slots] sum(q) of the block's first 16 elements
  bool has_panels() const { return rows > kPanelMinRows; }
  int64_t Slot(int64_t m, int64_t b) const {
    const int64_t nb = cols / 32;
    return has_panels() ? ((m / kPanelRows) * nb + b) * kPanelRows + m % kPanelRows : m * nb + b;
  }
};

// A weight matrix repacked for the kernels (see the file comment). Immutable once built.
struct PackedQuantMatrix {
  GgmlType type = GgmlType::kQ4_0;
  int64_t n_out = 0;
  int64_t n_in = 0;
  int64_t groups = 0;         // ceil(n_out / 8); rows past n_out are zero padding
  int64_t block_bytes = 0;    // per group and block
  std::vector<uint8_t> data;  // [groups][n_in / 32][block_bytes]
  std::vector<float> super;   // K-quants: [groups][n_in / 256][8 or 16] super-block scales
};

// Row `row` of W in fp32, bit-identical to DequantizeRow (kernels/cpu/dequant.h) of the source
// row it was packed from: the packed layout keeps every quant and scale, and the values are
// formed by ggml's operations (see quant_layout.h). What lets a tied embedding's lookups read
// the output projection's matrix instead of the checkpoint's copy of the same table.
// REQUIRES: 0 <= row < w.n_out; out holds w.n_in floats.
void DequantizePackedRow(const PackedQuantMatrix& w, int64_t row, float* out);

// True for the weight types QuantMatmul accepts.
bool IsQuantMatmulType(GgmlType type);

// Repacks `n_out` rows of `n_in` elements in GGML `type` blocks (rows contiguous).
// InvalidArgument for another type or n_in not a multiple of the type's block (32; 256 for
// K-quants). `rows_done`, when set, is called as packing goes with the number of leading
// source rows it will not read again (increasing, the last call with n_out), so that a caller
// can release them before the whole matrix is packed.
absl::StatusOr<PackedQuantMatrix> PackQuantMatrix(
    GgmlType type, const uint8_t* blocks, int64_t n_out, int64_t n_in,
    const std::function<void(int64_t rows_done)>& rows_done = nullptr);

// Quantizes x[rows][cols] (row stride `ldx` floats) into `out`.
// REQUIRES: cols % 32 == 0.
void QuantizeActivations(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         QuantizedActivations* out, ThreadPool* pool);

// The same in two parts, for a caller that quantizes rows inside its own parallel region:
// ResizeActivations sets out's shape to rows x cols (growing its buffers if needed), then
// QuantizeActivationRows fills rows [r0, r1) from x (row r at x + r * ldx). Rows are
// independent: any split gives QuantizeActivations' bits. REQUIRES: cols % 32 == 0,
// 0 <= r0 <= r1 <= out->rows.
void ResizeActivations(int64_t rows, int64_t cols, QuantizedActivations* out);
void QuantizeActivationRows(const float* x, int64_t r0, int64_t r1, int64_t ldx,
                            QuantizedActivations* out);

// y[m][n] = sum_k x[m][k] * W[n][k] for m < x.rows, n < w.n_out; y has row stride `ldy`.
// REQUIRES: x.cols == w.n_in.
void QuantMatmul(const PackedQuantMatrix& w, const QuantizedActivations& x, float* y, int64_t ldy,
                 ThreadPool* pool);

// Several products of the same activations (Q, K and V; gate and up) as one parallel region,
// the matrices' row groups shared out across the threads together: one hand-off instead of one
// per matrix, and no thread idle on a small matrix. Each y is what QuantMatmul gives.
struct QuantMatmulJob {
  const PackedQuantMatrix* w = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
};
void QuantMatmulMany(const QuantMatmulJob* jobs, int num_jobs, const QuantizedActivations& x,
                     ThreadPool* pool);

namespace internal {
// One row of activations (nb blocks of 32) to int8 blocks: d = max|x| / 127, q = x / d rounded
// half to even, and the block sums. Block b goes to slot b * stride (quants at qs[slot * 32],
// scalars at ds[slot] etc.): 1 for a row-major row, kPanelRows for a row in its panel.
// Bit-identical to each other for finite inputs (max, one division, one multiply and the rounding
// are exact IEEE steps; the sums are integers).
void QuantizeRowPortable(const float* x, int64_t nb, int64_t stride, int8_t* qs, float* ds,
                         float* ss, int32_t* sums, int32_t* sums_lo);
void QuantizeRowAvx512(const float* x, int64_t nb, int64_t stride, int8_t* qs, float* ds, float* ss,
                       int32_t* sums, int32_t* sums_lo);
void QuantizeRowAvx2(const float* x, int64_t nb, int64_t stride, int8_t* qs, float* ds, float* ss,
                     int32_t* sums, int32_t* sums_lo);
// One kernel invocation: row groups [g_begin, g_end) of W against all rows of x.
void QuantMatmulGroupsPortable(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
                               const QuantizedActivations& x, float* y, int64_t ldy);
void QuantMatmulGroupsAvx512(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
                             const QuantizedActivations& x, float* y, int64_t ldy);
void QuantMatmulGroupsAvx2(const PackedQuantMatrix& w, int64_t g_begin, int64_t g_end,
                           const QuantizedActivations& x, float* y, int64_t ldy);
}  // namespace internal

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_QUANT_MATMUL_H_
