// The CUDA backend -- an interface sketch. What exists is the host-side plan of what the backend
// will put on the GPU (PlanCudaUpload: each tensor's shard of the checkpoint, the type it takes
// on the device, the bytes), checked here on the CPU; CreateCudaBackend validates its options
// and that plan, then refuses with Unimplemented: the kernels, the device KV pool, on-device
// sampling and CUDA graphs are the next issue. Nothing here calls the CUDA runtime, so it builds
// everywhere.
#ifndef PAGELLM_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_
#define PAGELLM_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ggml_type.h"
#include "worker/backend/backend.h"
#include "worker/model/model_checkpoint.h"
#include "worker/model/tensor_map.h"

namespace pagellm {

struct CudaBackendOptions {
  int device_id = 0;
  // Weight and activation type on the device: auto (the checkpoint's bf16/fp16; bf16 for
  // anything else) | bfloat16 | float16.
  std::string dtype = "auto";
  // Fraction of device memory for weights, activations and the KV pool; the pool gets what the
  // weights and one profiled step at max_batch_tokens leave.
  double gpu_memory_utilization = 0.9;
  int64_t block_size = 16;
  int64_t num_kv_blocks = 0;     // 0: from gpu_memory_utilization
  int64_t swap_space_bytes = 0;  // pinned host memory for the swap pool
  int64_t max_batch_tokens = 2048;
  bool enforce_eager = false;  // no CUDA graphs for decode steps
  ShardSpec shard;             // this device's rank in tensor parallelism
};

// One tensor the backend uploads: this rank's shard of it (a view into the checkpoint) and its
// form on the device.
struct CudaUploadEntry {
  std::string name;
  TensorView shard;
  GgmlType device_dtype = GgmlType::kBF16;
  int64_t device_bytes = 0;
  bool converted = false;  // widened or dequantized on the way (quantized GGUF, fp32)
};

struct CudaUploadPlan {
  std::vector<CudaUploadEntry> tensors;
  int64_t total_device_bytes = 0;
  int64_t converted_tensors = 0;
};

// The upload plan of `checkpoint` for `options`. InvalidArgument for a bad dtype, a shard spec
// that does not divide the model (heads, KV heads, intermediate size), or a tensor that cannot be
// cut.
absl::StatusOr<CudaUploadPlan> PlanCudaUpload(const ModelCheckpoint& checkpoint,
                                              const CudaBackendOptions& options);

// Validates the options and the upload plan (InvalidArgument as PlanCudaUpload), then returns
// Unimplemented naming what to use instead: the CUDA backend is not built yet.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(
    std::shared_ptr<const ModelCheckpoint> checkpoint, const CudaBackendOptions& options);

// The sketch's Backend: shapes and sizes from the plan, every step Unimplemented. For the test
// that the boundary takes a device backend; nothing serves with it.
std::unique_ptr<Backend> TEST_NewCudaBackendSketch(std::shared_ptr<const ModelCheckpoint> ckpt,
                                                   const CudaBackendOptions& options);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_
