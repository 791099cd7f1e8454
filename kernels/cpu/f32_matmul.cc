#include "kernels/cpu/f32_matmul.h"

#include <cblas.h>

#include <algorithm>

namespace pagellm::kernels {
namespace {
// Output columns per unit of work: slices stay whole multiples of OpenBLAS's register tiles.
constexpr int64_t kColumnBlock = 64;
}  // namespace

void F32Matmul(const float* x, int64_t m, int64_t k, int64_t ldx, const float* w, int64_t n,
               float* y, int64_t ldy, ThreadPool* pool) {
  auto slice = [&](int64_t begin, int64_t end, int) {
    const int64_t n0 = begin * kColumnBlock, n1 = std::min(n, end * kColumnBlock);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m),
                static_cast<int>(n1 - n0), static_cast<int>(k), 1.0f, x, static_cast<int>(ldx),
                w + n0 * k, static_cast<int>(k), 0.0f, y + n0, static_cast<int>(ldy));
  };
  const int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
  if (pool != nullptr) {
    pool->ParallelFor(blocks, slice);
  } else {
    slice(0, blocks, 0);
  }
}

void UseSingleThreadedBlas() { openblas_set_num_threads(1); }

}  // namespace pagellm::kernels
