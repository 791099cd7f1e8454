// LoRA: the low-rank update of one linear layer, y += B (A x), for rows of activations.
//
// A is [rank][n_in] row-major; B is given transposed, bt = B^T as [rank][n_out] row-major, with
// the adapter's scaling (alpha / rank) already folded in. Each row's result is computed alone,
// with a fixed order of fused multiply-adds (16 lanes over n_in, then the lanes in order; then
// the rank's terms in order), so it does not depend on which other rows are in the call (LoRA
// keeps the forward pass batch-invariant) nor on the path: AVX-512, AVX2 and portable give the
// same bits. Cost: rank * (n_in + n_out) multiply-adds a row, in fp32 vector fma.
//
// Thread-safe: pure function of its arguments (rows may be split across threads by the caller).
#ifndef PAGELLM_KERNELS_CPU_LORA_H_
#define PAGELLM_KERNELS_CPU_LORA_H_

#include <cstdint>

namespace pagellm::kernels {

// The largest rank LoraAddRows takes (the scratch of one row's A x lives on the stack).
inline constexpr int64_t kMaxLoraRank = 256;

// For r in [0, rows): y[r * ldy + o] += sum_j bt[j * n_out + o] * dot(a[j * n_in ...], x[r * ldx
// ...]) for o in [0, n_out). REQUIRES: 0 < rank <= kMaxLoraRank.
void LoraAddRows(const float* x, int64_t ldx, int64_t rows, const float* a, const float* bt,
                 int64_t rank, int64_t n_in, int64_t n_out, float* y, int64_t ldy);

namespace internal {  // the paths LoraAddRows picks from (GetCpuFeatures), for the tests
void LoraAddRowsPortable(const float* x, int64_t ldx, int64_t rows, const float* a, const float* bt,
                         int64_t rank, int64_t n_in, int64_t n_out, float* y, int64_t ldy);
void LoraAddRowsAvx2(const float* x, int64_t ldx, int64_t rows, const float* a, const float* bt,
                     int64_t rank, int64_t n_in, int64_t n_out, float* y, int64_t ldy);
void LoraAddRowsAvx512(const float* x, int64_t ldx, int64_t rows, const float* a, const float* bt,
                       int64_t rank, int64_t n_in, int64_t n_out, float* y, int64_t ldy);
}  // namespace internal

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_LORA_H_
