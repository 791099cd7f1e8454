// LoRA on the GPU: y += B (A x) for the token rows of a step that run an adapter, after the base
// GEMM wrote y (kernels/cpu/lora.h is the CPU's). Two kernels: shrink, u[t] = A x[t] (a warp per
// rank row, lanes over n_in, fp32), then expand, y[t][o] += sum_j u[t][j] * B^T[j][o] (a thread
// per output, fp32 sum, rounded once into y's 16-bit type). Rows whose adapter is -1, or whose
// adapter leaves this module alone (a null slot), return at once, so one launch serves a batch
// of any mix and a captured graph any batch.
//
// Launchers never allocate and return cudaError_t (cudaErrorInvalidValue for a bad shape or
// dtype). All pointers are device pointers.
#ifndef PAGELLM_KERNELS_CUDA_LORA_H_
#define PAGELLM_KERNELS_CUDA_LORA_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/paged_kv.h"

namespace pagellm::kernels::cuda {

// One adapter's matrices for one module of one layer: A [rank][n_in] and scaling * B^T
// [rank][n_out], fp32. a == nullptr: the adapter does not adapt this module.
struct LoraSlot {
  const float* a = nullptr;
  const float* bt = nullptr;
  int32_t rank = 0;
};

struct LoraParams {
  const void* x = nullptr;  // [num_tokens][ldx] in dtype: the module's input
  int64_t ldx = 0;
  void* y = nullptr;  // [num_tokens][ldy] in dtype: the base product, updated in place
  int64_t ldy = 0;
  KvDtype dtype = KvDtype::kBF16;  // kBF16 or kF16
  int64_t n_in = 0, n_out = 0;
  int64_t num_tokens = 0;
  const int32_t* token_adapter = nullptr;  // [num_tokens]: -1, or an index into slots
  const LoraSlot* slots = nullptr;         // [adapters] for this layer and module
  float* u = nullptr;                      // [num_tokens][max_rank] scratch
  int32_t max_rank = 0;                    // >= every slot's rank
};

cudaError_t LaunchLora(const LoraParams& p, cudaStream_t stream);

}  // namespace pagellm::kernels::cuda

#endif  // PAGELLM_KERNELS_CUDA_LORA_H_
