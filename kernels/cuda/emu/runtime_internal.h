// What the emulator's scheduler (runtime.cc) and its runtime API (runtime_api.cc) share. Internal
// to kernels/cuda/emu.
#ifndef PAGELLM_KERNELS_CUDA_EMU_RUNTIME_INTERNAL_H_
#define PAGELLM_KERNELS_CUDA_EMU_RUNTIME_INTERNAL_H_

#include <cuda_runtime.h>

#include <functional>
#include <vector>

namespace cuda_emu::internal {

// Work recorded from a captured stream, in order; a graph and its instance are one such list.
using Graph = std::vector<std::function<cudaError_t()>>;

// A stream records into `capture` instead of running while it is being captured.
struct Stream {
  Graph* capture = nullptr;
};

// The sticky error of a failed launch: kept until the next query takes it (cudaGetLastError, a
// synchronizing call), the first one wins. Thread-safe.
void SetPending(cudaError_t e);
cudaError_t TakePending();
cudaError_t PeekPending();

}  // namespace cuda_emu::internal

#endif  // PAGELLM_KERNELS_CUDA_EMU_RUNTIME_INTERNAL_H_
