#include "kernels/cpu/f32_matmul.h"

#include <cblas.h>

namespace pagellm::kernels {

void F32Matmul(const float* x, int64_t m, int64_t k, int64_t ldx, const float* w, int64_t n,
               float* y, int64_t ldy) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(ldx), w, static_cast<int>(k), 0.0f, y,
              static_cast<int>(ldy));
}

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

}  // namespace pagellm::kernels
