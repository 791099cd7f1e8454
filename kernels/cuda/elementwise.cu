// Grid-stride loops; the embedding gather moves 16 bytes per thread when the row allows it.
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/elementwise.h"

namespace pagellm::kernels::cuda {
namespace {

constexpr int kThreads = 256;

unsigned GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

template <typename T>
__global__ void EmbeddingKernel(const T* table, const int32_t* ids, int64_t dim,
                                int64_t vocab_begin, int64_t table_rows, float* residual) {
  const int64_t row = static_cast<int64_t>(ids[blockIdx.x]) - vocab_begin;
  float* dst = residual + static_cast<int64_t>(blockIdx.x) * dim;
  if (row < 0 || row >= table_rows) {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = 0.0f;
    return;
  }
  const T* src = table + row * dim;
  if (dim % 8 == 0) {
    for (int64_t i = threadIdx.x * 8; i < dim; i += blockDim.x * 8) {
      float v[8];
      Load8(src + i, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) dst[i + j] = v[j];
    }
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = ToFloat(src[i]);
  }
}

__global__ void InterleaveShardsKernel(const float* src, int64_t shards, int64_t rows, int64_t cols,
                                       float* dst) {
  const int64_t n = shards * rows * cols;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // k walks dst in order (coalesced writes); each shard's run of cols is coalesced on reads.
    const int64_t r = k / (shards * cols), j = k % (shards * cols);
    const int64_t s = j / cols, c = j % cols;
    dst[k] = src[(s * rows + r) * cols + c];
  }
}

template <typename T>
__global__ void SiluMulKernel(const T* gate_up, int64_t rows, int64_t inter, T* out) {
  const int64_t n = rows * inter;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = k / inter, i = k % inter;
    const float g = ToFloat(gate_up[r * 2 * inter + i]);
    const float u = ToFloat(gate_up[r * 2 * inter + inter + i]);
    out[k] = FromFloat<T>(g / (1.0f + __expf(-g)) * u);
  }
}

template <typename S, typename D>
__global__ void ConvertKernel(const S* src, int64_t n, D* dst) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[k] = FromFloat<D>(ToFloat(src[k]));
  }
}

__device__ __forceinline__ uint64_t SplitMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename D>
__global__ void FillUniformKernel(D* dst, int64_t n, uint64_t seed, float scale) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(k)));
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    dst[k] = FromFloat<D>((2.0f * u - 1.0f) * scale);
  }
}

template <typename D>
__global__ void FillConstantKernel(D* dst, int64_t n, float value) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[k] = FromFloat<D>(value);
  }
}

template <typename S>
cudaError_t ConvertFrom(const S* src, int64_t n, void* dst, KvDtype dst_dtype,
                        cudaStream_t stream) {
  switch (dst_dtype) {
    case KvDtype::kF32:
      ConvertKernel<<<GridFor(n), kThreads, 0, stream>>>(src, n, static_cast<float*>(dst));
      break;
    case KvDtype::kF16:
      ConvertKernel<<<GridFor(n), kThreads, 0, stream>>>(src, n, static_cast<__half*>(dst));
      break;
    case KvDtype::kBF16:
      ConvertKernel<<<GridFor(n), kThreads, 0, stream>>>(src, n, static_cast<__nv_bfloat16*>(dst));
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchEmbedding(const void* table, KvDtype dtype, const int32_t* ids, int64_t rows,
                            int64_t dim, int64_t vocab_begin, int64_t table_rows, float* residual,
                            cudaStream_t stream) {
  if (rows < 0 || dim <= 0 || rows > (1ll << 31) - 1 || vocab_begin < 0 || table_rows <= 0) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  PAGELLM_DISPATCH_HALF(
      dtype, T,
      EmbeddingKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
          static_cast<const T*>(table), ids, dim, vocab_begin, table_rows, residual));
  return cudaGetLastError();
}

cudaError_t LaunchInterleaveShards(const float* src, int64_t shards, int64_t rows, int64_t cols,
                                   float* dst, cudaStream_t stream) {
  if (shards <= 0 || rows < 0 || cols <= 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  InterleaveShardsKernel<<<GridFor(shards * rows * cols), kThreads, 0, stream>>>(src, shards, rows,
                                                                                 cols, dst);
  return cudaGetLastError();
}

cudaError_t LaunchSiluMul(const void* gate_up, int64_t rows, int64_t inter, KvDtype dtype,
                          void* out, cudaStream_t stream) {
  if (rows < 0 || inter <= 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  PAGELLM_DISPATCH_HALF(dtype, T,
                        SiluMulKernel<T><<<GridFor(rows * inter), kThreads, 0, stream>>>(
                            static_cast<const T*>(gate_up), rows, inter, static_cast<T*>(out)));
  return cudaGetLastError();
}

cudaError_t LaunchConvert(const void* src, KvDtype src_dtype, int64_t n, void* dst,
                          KvDtype dst_dtype, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  switch (src_dtype) {
    case KvDtype::kF32:
      return ConvertFrom(static_cast<const float*>(src), n, dst, dst_dtype, stream);
    case KvDtype::kF16:
      return ConvertFrom(static_cast<const __half*>(src), n, dst, dst_dtype, stream);
    case KvDtype::kBF16:
      return ConvertFrom(static_cast<const __nv_bfloat16*>(src), n, dst, dst_dtype, stream);
    default:  // the fp8 types are the CPU kernels' only
      return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchFillUniform(void* dst, KvDtype dst_dtype, int64_t n, uint64_t seed, float scale,
                              cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  switch (dst_dtype) {
    case KvDtype::kF32:
      FillUniformKernel<<<GridFor(n), kThreads, 0, stream>>>(static_cast<float*>(dst), n, seed,
                                                             scale);
      break;
    case KvDtype::kF16:
      FillUniformKernel<<<GridFor(n), kThreads, 0, stream>>>(static_cast<__half*>(dst), n, seed,
                                                             scale);
      break;
    case KvDtype::kBF16:
      FillUniformKernel<<<GridFor(n), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n,
                                                             seed, scale);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchFillConstant(void* dst, KvDtype dst_dtype, int64_t n, float value,
                               cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  switch (dst_dtype) {
    case KvDtype::kF32:
      FillConstantKernel<<<GridFor(n), kThreads, 0, stream>>>(static_cast<float*>(dst), n, value);
      break;
    case KvDtype::kF16:
      FillConstantKernel<<<GridFor(n), kThreads, 0, stream>>>(static_cast<__half*>(dst), n, value);
      break;
    case KvDtype::kBF16:
      FillConstantKernel<<<GridFor(n), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n,
                                                              value);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace pagellm::kernels::cuda
