// Device-side helpers shared by the CUDA kernels: the 16-bit element types behind KvDtype,
// conversions to and from float, 16-byte vector loads and stores of 8 elements, and warp/block
// reductions. Include only from .cu files.
#ifndef PAGELLM_KERNELS_CUDA_CUDA_TYPES_CUH_
#define PAGELLM_KERNELS_CUDA_CUDA_TYPES_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/paged_kv.h"

namespace pagellm::kernels::cuda {

__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(float x) { return x; }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}

// Eight 16-bit elements at p (16-byte aligned) as floats.
template <typename T>
__device__ __forceinline__ void Load8(const T* p, float out[8]) {
  static_assert(sizeof(T) == 2, "16-bit types only");
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = ToFloat(e[i]);
}

template <typename T>
__device__ __forceinline__ void Store8(T* p, const float in[8]) {
  static_assert(sizeof(T) == 2, "16-bit types only");
  uint4 raw;
  T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) e[i] = FromFloat<T>(in[i]);
  *reinterpret_cast<uint4*>(p) = raw;
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block, returned to every thread. REQUIRES: blockDim.x a multiple of 32, at most
// 1024; every thread calls it; `scratch` holds 33 floats.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = WarpSum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < warps ? scratch[lane] : 0.0f;
    w = WarpSum(w);
    if (lane == 0) scratch[32] = w;
  }
  __syncthreads();
  return scratch[32];
}

}  // namespace pagellm::kernels::cuda

// Runs the statement with T bound to the CUDA type of a 16-bit KvDtype; returns
// cudaErrorInvalidValue from the enclosing function for any other dtype.
#define PAGELLM_DISPATCH_HALF(dtype, T, ...)   \
  switch (dtype) {                             \
    case ::pagellm::kernels::KvDtype::kBF16: { \
      using T = __nv_bfloat16;                 \
      __VA_ARGS__;                             \
      break;                                   \
    }                                          \
    case ::pagellm::kernels::KvDtype::kF16: {  \
      using T = __half;                        \
      __VA_ARGS__;                             \
      break;                                   \
    }                                          \
    default:                                   \
      return cudaErrorInvalidValue;            \
  }

#endif  // PAGELLM_KERNELS_CUDA_CUDA_TYPES_CUH_
