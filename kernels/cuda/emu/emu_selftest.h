// Launchers of the emulator's self-test kernels (emu_selftest.cu). Each returns the launch's
// error. Test-only.
#ifndef PAGELLM_KERNELS_CUDA_EMU_EMU_SELFTEST_H_
#define PAGELLM_KERNELS_CUDA_EMU_EMU_SELFTEST_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace pagellm::kernels::cuda::emu_selftest {

// out[128 w + 32 k + lane] of warp w: k = 0 xor 5, 1 down 3, 2 up 3, 3 lane 7 of each half-warp.
cudaError_t Shuffle(const int* in, int* out, int threads);
// out[lane] = the warp's ballot of in[lane] > 0.
cudaError_t Ballot(const int* in, unsigned* out);
// c (16 x 8, row-major fp32) += a (16 x 16, row-major) x b (16 x 8, row-major), bf16 or fp16 bits.
cudaError_t Mma(const uint16_t* a, const uint16_t* b, float* c, bool bf16);
// out[block * threads + thread] = what the thread read of thread 0's shared write.
cudaError_t Shared(uint32_t* out, int blocks, int threads, bool barrier);
// out[i] = 3 (threads - 1 - i), through dynamic shared memory.
cudaError_t DynamicShared(uint32_t* out, int threads);
// Undefined behaviour the emulator must refuse.
cudaError_t ExitedLane(int* out);
cudaError_t Divergent(int* out);
cudaError_t LargeShared(float* out);
// DynamicShared's kernel under any launch configuration.
cudaError_t Configured(dim3 grid, dim3 block, size_t dynamic_shared, uint32_t* out);

}  // namespace pagellm::kernels::cuda::emu_selftest

#endif  // PAGELLM_KERNELS_CUDA_EMU_EMU_SELFTEST_H_
