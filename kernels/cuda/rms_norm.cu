#include "kernels/cuda/rms_norm.h"

namespace pagellm::kernels::cuda {
namespace {

// One block per row; a block-wide reduction of the sum of squares in shared memory.
template <int THREADS>
__global__ void RmsNormKernel(const float* x, const float* weight, int64_t dim, float eps,
                              float* y) {
  __shared__ float partial[THREADS];
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += THREADS) ss += xr[i] * xr[i];
  partial[threadIdx.x] = ss;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float scale = rsqrtf(partial[0] / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += THREADS) yr[i] = xr[i] * scale * weight[i];
}

}  // namespace

cudaError_t LaunchRmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                          float* y, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  RmsNormKernel<kThreads>
      <<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, dim, eps, y);
  return cudaGetLastError();
}

}  // namespace pagellm::kernels::cuda
