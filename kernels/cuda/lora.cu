// Shrink: one block of 8 warps per token row, a warp per rank row of A (strided), lanes over
// n_in, WarpSum. Expand: a thread per (token, output column), the rank's terms summed in order.
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/lora.h"

namespace pagellm::kernels::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;

// Token t's slot, or null when its row runs no adapter or one that leaves the module alone.
__device__ __forceinline__ const LoraSlot* SlotOf(const LoraParams& p, int64_t t) {
  const int32_t adapter = p.token_adapter[t];
  if (adapter < 0 || p.slots[adapter].a == nullptr) return nullptr;
  return &p.slots[adapter];
}

template <typename T>
__global__ void LoraShrinkKernel(LoraParams p) {
  const int64_t t = blockIdx.x;
  const LoraSlot* found = SlotOf(p, t);
  if (found == nullptr) return;
  const LoraSlot slot = *found;
  const T* x = static_cast<const T*>(p.x) + t * p.ldx;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int32_t j = warp; j < slot.rank; j += kWarps) {
    const float* aj = slot.a + static_cast<int64_t>(j) * p.n_in;
    float s = 0.0f;
    for (int64_t k = lane; k < p.n_in; k += 32) s += aj[k] * ToFloat(x[k]);
    s = WarpSum(s);
    if (lane == 0) p.u[t * p.max_rank + j] = s;
  }
}

template <typename T>
__global__ void LoraExpandKernel(LoraParams p) {
  const int64_t t = blockIdx.x;
  const LoraSlot* found = SlotOf(p, t);
  if (found == nullptr) return;
  const LoraSlot slot = *found;
  const int64_t o = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  if (o >= p.n_out) return;
  const float* u = p.u + t * p.max_rank;
  float acc = 0.0f;
  for (int32_t j = 0; j < slot.rank; ++j)
    acc += u[j] * slot.bt[static_cast<int64_t>(j) * p.n_out + o];
  T* y = static_cast<T*>(p.y) + t * p.ldy + o;
  *y = FromFloat<T>(ToFloat(*y) + acc);
}

}  // namespace

cudaError_t LaunchLora(const LoraParams& p, cudaStream_t stream) {
  if (p.num_tokens < 0 || p.n_in <= 0 || p.n_out <= 0 || p.max_rank <= 0 || p.ldx < p.n_in ||
      p.ldy < p.n_out || p.x == nullptr || p.y == nullptr || p.u == nullptr ||
      p.token_adapter == nullptr || p.slots == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (p.num_tokens == 0) return cudaSuccess;
  const dim3 shrink(static_cast<unsigned>(p.num_tokens));
  const dim3 expand(static_cast<unsigned>(p.num_tokens),
                    static_cast<unsigned>((p.n_out + kThreads - 1) / kThreads));
  PAGELLM_DISPATCH_HALF(p.dtype, T, {
    LoraShrinkKernel<T><<<shrink, kThreads, 0, stream>>>(p);
    LoraExpandKernel<T><<<expand, kThreads, 0, stream>>>(p);
  });
  return cudaGetLastError();
}

}  // namespace pagellm::kernels::cuda
