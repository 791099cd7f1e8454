// Block (i, j) copies the j-th slice of pair i with 16-byte accesses.
#include "kernels/cuda/kv_copy.h"

namespace pagellm::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kSliceBytes = 16 * kThreads * 8;  // each thread moves 8 vectors per slice

__global__ void CopyBlocksKernel(uint4* pool, int64_t block_vecs, const int32_t* pairs) {
  const int64_t src = pairs[2 * blockIdx.x], dst = pairs[2 * blockIdx.x + 1];
  const uint4* from = pool + src * block_vecs;
  uint4* to = pool + dst * block_vecs;
  const int64_t begin = blockIdx.y * (kSliceBytes / 16);
  const int64_t end = min(block_vecs, begin + kSliceBytes / 16);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) to[i] = from[i];
}

}  // namespace

cudaError_t LaunchCopyBlocks(void* pool, int64_t block_bytes, const int32_t* pairs, int64_t n,
                             cudaStream_t stream) {
  if (n < 0 || n > (1ll << 31) - 1 || block_bytes <= 0 || block_bytes % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) return cudaSuccess;
  const int64_t slices = (block_bytes + kSliceBytes - 1) / kSliceBytes;
  if (slices > 65535) return cudaErrorInvalidValue;
  CopyBlocksKernel<<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(slices)), kThreads, 0,
                     stream>>>(static_cast<uint4*>(pool), block_bytes / 16, pairs);
  return cudaGetLastError();
}

}  // namespace pagellm::kernels::cuda
