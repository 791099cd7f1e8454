// Kernels that exercise the emulator itself (emu_test.cc): warp collectives, the tensor-core
// tile, shared memory and barriers, and what the hardware leaves undefined. Built only through
// translate.py for the emulator, never by nvcc: these are not product kernels.
#include <cstdint>

#include "kernels/cuda/emu/emu_selftest.h"

namespace pagellm::kernels::cuda::emu_selftest {
namespace {

// out[4 * 32 * w + 32 * k + lane] for k = xor 5, down 3, up 3, idx 7 (width 16).
__global__ void ShuffleKernel(const int* in, int* out) {
  const int lane = threadIdx.x % 32, base = threadIdx.x - lane;
  const int v = in[threadIdx.x];
  out[4 * base + lane] = __shfl_xor_sync(0xffffffffu, v, 5);
  out[4 * base + 32 + lane] = __shfl_down_sync(0xffffffffu, v, 3);
  out[4 * base + 64 + lane] = __shfl_up_sync(0xffffffffu, v, 3);
  out[4 * base + 96 + lane] = __shfl_sync(0xffffffffu, v, 7, 16);
}

__global__ void BallotKernel(const int* in, unsigned* out) {
  out[threadIdx.x] = __ballot_sync(0xffffffffu, in[threadIdx.x] > 0);
}

// One m16n8k16 tile: A row-major 16 x 16, B row-major 16 x 8 (k, n), C/D row-major 16 x 8,
// loaded into fragments as the PTX ISA lays them out.
__global__ void MmaKernel(const uint16_t* a, const uint16_t* b, float* c, int bf16) {
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  auto pair = [](uint16_t lo, uint16_t hi) { return uint32_t{lo} | (uint32_t{hi} << 16); };
  const uint32_t a0 = pair(a[g * 16 + 2 * t], a[g * 16 + 2 * t + 1]);
  const uint32_t a1 = pair(a[(g + 8) * 16 + 2 * t], a[(g + 8) * 16 + 2 * t + 1]);
  const uint32_t a2 = pair(a[g * 16 + 2 * t + 8], a[g * 16 + 2 * t + 9]);
  const uint32_t a3 = pair(a[(g + 8) * 16 + 2 * t + 8], a[(g + 8) * 16 + 2 * t + 9]);
  const uint32_t b0 = pair(b[(2 * t) * 8 + g], b[(2 * t + 1) * 8 + g]);
  const uint32_t b1 = pair(b[(2 * t + 8) * 8 + g], b[(2 * t + 9) * 8 + g]);
  float d[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                c[(g + 8) * 8 + 2 * t + 1]};
  if (bf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  __syncthreads();
  c[g * 8 + 2 * t] = d[0];
  c[g * 8 + 2 * t + 1] = d[1];
  c[(g + 8) * 8 + 2 * t] = d[2];
  c[(g + 8) * 8 + 2 * t + 1] = d[3];
}

// Thread 0 writes the block's index to shared memory; every thread copies what it sees, with or
// without a barrier between.
__global__ void SharedKernel(uint32_t* out, int barrier) {
  __shared__ uint32_t value;
  if (threadIdx.x == 0) value = blockIdx.x;
  if (barrier) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = value;
}

__global__ void DynamicSharedKernel(uint32_t* out) {
  extern __shared__ uint32_t words[];
  words[threadIdx.x] = threadIdx.x * 3;
  __syncthreads();
  out[threadIdx.x] = words[blockDim.x - 1 - threadIdx.x];
}

// Lane 5 leaves before a full-mask shuffle: undefined on the hardware.
__global__ void ExitedLaneKernel(int* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

// Half the warp at a barrier, half at a shuffle naming them all.
__global__ void DivergentKernel(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
  }
}

__global__ void LargeSharedKernel(float* out) {
  __shared__ float big[13 * 1024];  // 52 KiB
  big[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = big[threadIdx.x];
}

}  // namespace

cudaError_t Shuffle(const int* in, int* out, int threads) {
  ShuffleKernel<<<1, threads>>>(in, out);
  return cudaGetLastError();
}

cudaError_t Ballot(const int* in, unsigned* out) {
  BallotKernel<<<1, 32>>>(in, out);
  return cudaGetLastError();
}

cudaError_t Mma(const uint16_t* a, const uint16_t* b, float* c, bool bf16) {
  MmaKernel<<<1, 32>>>(a, b, c, bf16 ? 1 : 0);
  return cudaGetLastError();
}

cudaError_t Shared(uint32_t* out, int blocks, int threads, bool barrier) {
  SharedKernel<<<blocks, threads>>>(out, barrier ? 1 : 0);
  return cudaGetLastError();
}

cudaError_t DynamicShared(uint32_t* out, int threads) {
  DynamicSharedKernel<<<1, threads, threads * sizeof(uint32_t), nullptr>>>(out);
  return cudaGetLastError();
}

cudaError_t ExitedLane(int* out) {
  ExitedLaneKernel<<<1, 32>>>(out);
  return cudaGetLastError();
}

cudaError_t Divergent(int* out) {
  DivergentKernel<<<1, 32>>>(out);
  return cudaGetLastError();
}

cudaError_t LargeShared(float* out) {
  LargeSharedKernel<<<1, 32>>>(out);
  return cudaGetLastError();
}

cudaError_t Configured(dim3 grid, dim3 block, size_t dynamic_shared, uint32_t* out) {
  DynamicSharedKernel<<<grid, block, dynamic_shared, nullptr>>>(out);
  return cudaGetLastError();
}

}  // namespace pagellm::kernels::cuda::emu_selftest
