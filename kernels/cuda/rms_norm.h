// Fused residual add + RMSNorm on the GPU. The residual stream is fp32; the normalized output
// is in the compute type (bf16 or fp16) that the next matrix product reads.
//
// Launchers never allocate and return cudaError_t (cudaErrorInvalidValue for a bad shape or
// dtype); callers convert it to absl::Status once. All pointers are device pointers.
#ifndef PAGELLM_KERNELS_CUDA_RMS_NORM_H_
#define PAGELLM_KERNELS_CUDA_RMS_NORM_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/paged_kv.h"

namespace pagellm::kernels::cuda {

struct AddRmsNormParams {
  float* residual = nullptr;  // [rows of the source][dim] fp32
  // Optional: [same rows][dim] in `dtype`, added to the residual first (the previous
  // sub-layer's output).
  const void* add = nullptr;
  // Optional: output row i reads source row index[i]; otherwise row i.
  const int32_t* index = nullptr;
  // Store residual + add back into the residual (ignored without `add`).
  bool write_residual = true;
  const float* weight = nullptr;  // [dim]
  int64_t rows = 0;               // output rows
  int64_t dim = 0;
  float eps = 1e-5f;
  KvDtype dtype = KvDtype::kBF16;  // of `add` and `out`: kBF16 or kF16
  void* out = nullptr;             // [rows][dim]
};

// For each output row i with source row r (index[i] or i): v = residual[r] (+ add[r]);
// optionally residual[r] = v; out[i] = v / sqrt(mean(v^2) + eps) * weight, rounded once.
// REQUIRES: dim > 0; rows written back are distinct.
cudaError_t LaunchAddRmsNorm(const AddRmsNormParams& p, cudaStream_t stream);

}  // namespace pagellm::kernels::cuda

#endif  // PAGELLM_KERNELS_CUDA_RMS_NORM_H_
