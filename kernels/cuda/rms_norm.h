// CUDA RMSNorm: the first kernel of the CUDA backend (which implements worker/backend/backend.h).
// Launchers never allocate and return cudaError_t; callers convert it to absl::Status once.
#ifndef PAGELLM_KERNELS_CUDA_RMS_NORM_H_
#define PAGELLM_KERNELS_CUDA_RMS_NORM_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace pagellm::kernels::cuda {

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight for `rows` rows of `dim` floats (device
// pointers). In-place allowed.
cudaError_t LaunchRmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                          float* y, cudaStream_t stream);

}  // namespace pagellm::kernels::cuda

#endif  // PAGELLM_KERNELS_CUDA_RMS_NORM_H_
