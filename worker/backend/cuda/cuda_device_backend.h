// The CUDA backend proper (built only with PAGELLM_HAVE_CUDA): weights, the paged KV pool and the
// forward pass on one GPU, the swap pool in pinned host memory. CreateCudaBackend
// (cuda_backend.h) validates the options and the upload plan, then calls this.
//
// Memory planning follows vLLM: after the weights and the step scratch are allocated, one
// profiling step at max_batch_tokens runs; the KV pool gets
//   total * gpu_memory_utilization - (total - free)
// (what this and every other process on the device already use is subtracted), unless
// num_kv_blocks says otherwise.
//
// Sampling: greedy rows without penalties on the device, the others on the host over their
// logits rows (device_sampler.h).
#ifndef PAGELLM_WORKER_BACKEND_CUDA_CUDA_DEVICE_BACKEND_H_
#define PAGELLM_WORKER_BACKEND_CUDA_CUDA_DEVICE_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/backend/cuda/cuda_backend.h"

namespace pagellm::cuda {

// FailedPrecondition "no CUDA device found" (with the driver's error) when there is no usable
// GPU; ResourceExhausted when the weights, the scratch or a minimal KV pool do not fit;
// InvalidArgument for a shape the kernels do not support (head_dim other than 64 or 128).
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaDeviceBackend(
    std::shared_ptr<const ModelCheckpoint> checkpoint, const CudaUploadPlan& plan,
    const CudaBackendOptions& options);

}  // namespace pagellm::cuda

#endif  // PAGELLM_WORKER_BACKEND_CUDA_CUDA_DEVICE_BACKEND_H_
