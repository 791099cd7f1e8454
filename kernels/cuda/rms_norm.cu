// One block per output row. Pass 1 forms v = residual (+ add), stores it back when asked and
// sums v^2; pass 2 reads v again (from the residual it stored, or recomputed) and writes the
// normalized row. Each thread touches the same elements in both passes, so no barrier is needed
// between its store and its reload.
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/rms_norm.h"

namespace pagellm::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void AddRmsNormKernel(AddRmsNormParams p) {
  __shared__ float scratch[33];
  const int64_t r = p.index != nullptr ? p.index[blockIdx.x] : blockIdx.x;
  float* res = p.residual + r * p.dim;
  const T* add = p.add != nullptr ? static_cast<const T*>(p.add) + r * p.dim : nullptr;
  const bool store = add != nullptr && p.write_residual;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x) {
    float v = res[i];
    if (add != nullptr) v += ToFloat(add[i]);
    if (store) res[i] = v;
    ss += v * v;
  }
  const float scale = rsqrtf(BlockSum(ss, scratch) / static_cast<float>(p.dim) + p.eps);
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(blockIdx.x) * p.dim;
  for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x) {
    float v = res[i];
    if (add != nullptr && !store) v += ToFloat(add[i]);
    out[i] = FromFloat<T>(v * scale * p.weight[i]);
  }
}

}  // namespace

cudaError_t LaunchAddRmsNorm(const AddRmsNormParams& p, cudaStream_t stream) {
  if (p.rows < 0 || p.dim <= 0 || p.rows > (1ll << 31) - 1) return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  PAGELLM_DISPATCH_HALF(
      p.dtype, T, AddRmsNormKernel<T><<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p));
  return cudaGetLastError();
}

}  // namespace pagellm::kernels::cuda
