// The elementwise kernels of a Llama-family layer on the GPU, plus the conversions used when
// weights are loaded: embedding gather into the fp32 residual, SiLU-and-mul, float-type
// conversion, and random fill (--load-format dummy, generated on the device).
//
// Launchers never allocate and return cudaError_t (cudaErrorInvalidValue for a bad shape or
// dtype). All pointers are device pointers; element counts are in elements.
#ifndef PAGELLM_KERNELS_CUDA_ELEMENTWISE_H_
#define PAGELLM_KERNELS_CUDA_ELEMENTWISE_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/paged_kv.h"

namespace pagellm::kernels::cuda {

// residual[t][:] = table[ids[t]][:] widened to fp32, for `rows` tokens. table is
// [vocab][dim] in `dtype` (kBF16 or kF16). REQUIRES: 0 <= ids[t] < vocab (the caller checked).
cudaError_t LaunchEmbedding(const void* table, KvDtype dtype, const int32_t* ids, int64_t rows,
                            int64_t dim, float* residual, cudaStream_t stream);

// out[r][i] = silu(gate_up[r][i]) * gate_up[r][inter + i], computed in fp32 and rounded once;
// gate_up rows hold 2 * inter elements, out rows inter. dtype kBF16 or kF16.
cudaError_t LaunchSiluMul(const void* gate_up, int64_t rows, int64_t inter, KvDtype dtype,
                          void* out, cudaStream_t stream);

// dst[i] = src[i] converted (round to nearest even) for n elements; each dtype any of kF32,
// kF16, kBF16.
cudaError_t LaunchConvert(const void* src, KvDtype src_dtype, int64_t n, void* dst,
                          KvDtype dst_dtype, cudaStream_t stream);

// dst[i] = uniform in [-scale, scale), a pure function of (seed, i): the same on any device and
// launch shape. dst_dtype any of kF32, kF16, kBF16.
cudaError_t LaunchFillUniform(void* dst, KvDtype dst_dtype, int64_t n, uint64_t seed, float scale,
                              cudaStream_t stream);

// dst[i] = value for n elements of dst_dtype (kF32, kF16, kBF16).
cudaError_t LaunchFillConstant(void* dst, KvDtype dst_dtype, int64_t n, float value,
                               cudaStream_t stream);

}  // namespace pagellm::kernels::cuda

#endif  // PAGELLM_KERNELS_CUDA_ELEMENTWISE_H_
