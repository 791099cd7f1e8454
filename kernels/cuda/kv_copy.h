// Whole-block copies inside a device KV pool whose blocks are contiguous across layers (the
// CUDA backend's layout, kernels/paged_kv.h): copy-on-write for every layer at once, one launch
// for all of a step's copies. Swaps between device and host pools are plain cudaMemcpyAsync
// calls and need no kernel.
//
// Launchers never allocate and return cudaError_t. All pointers are device pointers.
#ifndef PAGELLM_KERNELS_CUDA_KV_COPY_H_
#define PAGELLM_KERNELS_CUDA_KV_COPY_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace pagellm::kernels::cuda {

// For i < n: bytes [pairs[2i] * block_bytes, + block_bytes) of `pool` are copied to
// [pairs[2i + 1] * block_bytes, ...). REQUIRES: block_bytes % 16 == 0; no block is both a
// source and a destination in one launch; ids inside the pool.
cudaError_t LaunchCopyBlocks(void* pool, int64_t block_bytes, const int32_t* pairs, int64_t n,
                             cudaStream_t stream);

}  // namespace pagellm::kernels::cuda

#endif  // PAGELLM_KERNELS_CUDA_KV_COPY_H_
