// fp32 matrix products through OpenBLAS (chosen by measurement over a hand-written kernel for
// fp32 weights: see tools/bench), on pagellm's thread pool: each thread multiplies its own slice
// of the output columns with a single-threaded sgemm. (OpenBLAS's own threads beside the pool's
// spinning workers oversubscribed the cores: batch-64 decode of the F32 model ran at 85 tok/s
// with 2 OpenBLAS threads, 484 with one.) Thread-safe as OpenBLAS is.
#ifndef PAGELLM_KERNELS_CPU_F32_MATMUL_H_
#define PAGELLM_KERNELS_CPU_F32_MATMUL_H_

#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace pagellm::kernels {

// y[m][n] = sum_k x[m][k] * w[n][k]; x is M x K (row stride ldx), w is N x K (rows contiguous),
// y has row stride ldy. The column slices depend only on n and the pool's size (may be null).
void F32Matmul(const float* x, int64_t m, int64_t k, int64_t ldx, const float* w, int64_t n,
               float* y, int64_t ldy, ThreadPool* pool);

// Makes OpenBLAS single-threaded (process-wide): F32Matmul parallelizes over the pool instead.
void UseSingleThreadedBlas();

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_F32_MATMUL_H_
