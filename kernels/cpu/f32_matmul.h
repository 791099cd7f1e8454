// fp32 matrix products through OpenBLAS (chosen by measurement over a hand-written kernel for
// fp32 weights: see tools/bench). Thread-safe as OpenBLAS is.
#ifndef PAGELLM_KERNELS_CPU_F32_MATMUL_H_
#define PAGELLM_KERNELS_CPU_F32_MATMUL_H_

#include <cstdint>

namespace pagellm::kernels {

// y[m][n] = sum_k x[m][k] * w[n][k]; x is M x K (row stride ldx), w is N x K (rows contiguous),
// y has row stride ldy.
void F32Matmul(const float* x, int64_t m, int64_t k, int64_t ldx, const float* w, int64_t n,
               float* y, int64_t ldy);

// Sets the number of OpenBLAS threads (process-wide).
void SetBlasThreads(int threads);

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_F32_MATMUL_H_
