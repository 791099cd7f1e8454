// The CUDA backend: its options, the host-side plan of what goes on the GPU (PlanCudaUpload:
// each tensor's shard of the checkpoint, the type it takes on the device, the bytes), and
// CreateCudaBackend. This header calls no CUDA API, so it builds everywhere; the backend itself
// (cuda_device_backend.h) is compiled where nvcc is found.
#ifndef PAGELLM_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_
#define PAGELLM_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ggml_type.h"
#include "worker/backend/backend.h"
#include "worker/dist/device_communicator.h"
#include "worker/model/lora_adapter.h"
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
  // Most sequences a step samples; the logits hold kMaxScoredRowsPerStep more rows (prompt
  // positions scored for prompt logprobs).
  int64_t max_num_seqs = 256;
  bool enforce_eager = false;  // no CUDA graphs for decode steps
  // Check every batch against forward_batch.h's contract before running it.
  bool validate_batches = ValidateBatchesByDefault();
  // Tensor parallelism: this device's rank, and the group's collectives on device buffers
  // (borrowed; it must outlive the backend). Null for a single rank; otherwise its rank and size
  // are `shard`'s.
  ShardSpec shard;
  DeviceCommunicator* communicator = nullptr;
  // LoRA adapters served beside the model, whole (each rank uploads its slice); their names are
  // adapter_names(), in this order. Each must fit the checkpoint's shapes.
  std::vector<std::shared_ptr<const LoraAdapter>> lora_adapters;
  // Adapter slots (lora_adapters fill the first; the rest take adapters loaded while serving,
  // SetAdapter), each a device region reserved at start for rank <= max_lora_rank (or the
  // largest of lora_adapters'). Slots cost a LoRA kernel pair per adapted GEMM of every step,
  // adapters or not: 0 (the default) reserves none beyond lora_adapters.
  int64_t max_loras = 0;
  int64_t max_lora_rank = 16;
};

// One tensor the backend uploads: this rank's shard of it (a view into the checkpoint) and its
// form on the device.
struct CudaUploadEntry {
  std::string name;
  TensorView shard;
  GgmlType device_dtype = GgmlType::kBF16;
  int64_t device_bytes = 0;
  bool converted = false;  // widened or dequantized on the way (quantized GGUF, fp32)
  // Made on the device (ModelCheckpoint::generated): `shard` has a shape and no data, and a
  // matrix's values are scaled for the whole tensor's input width, fan_in.
  bool generated = false;
  int64_t fan_in = 0;
};

struct CudaUploadPlan {
  GgmlType device_dtype = GgmlType::kBF16;  // of every matrix and the embedding
  // The vocabulary split of the embedding and LM head (VocabShard): this rank holds rows
  // [vocab_begin, vocab_begin + vocab_rows) of both.
  ShardSpec vocab_shard;
  int64_t vocab_begin = 0;
  int64_t vocab_rows = 0;
  std::vector<CudaUploadEntry> tensors;
  int64_t total_device_bytes = 0;
  int64_t converted_tensors = 0;
};

// The upload plan of `checkpoint` for `options`: Megatron-style shards (model_checkpoint.h) of the
// layers, and the embedding and LM head split by vocabulary rows when the world size divides the
// vocabulary (whole on every rank otherwise). InvalidArgument for a bad dtype, a shard spec that
// does not divide the model (heads, KV heads, intermediate size), or a tensor that cannot be cut.
absl::StatusOr<CudaUploadPlan> PlanCudaUpload(const ModelCheckpoint& checkpoint,
                                              const CudaBackendOptions& options);

// Validates the options and the upload plan (InvalidArgument as PlanCudaUpload), then builds the
// backend on GPU options.device_id: FailedPrecondition "no CUDA device found" without one,
// ResourceExhausted when the model does not fit (see cuda_device_backend.h), Unimplemented in a
// build without CUDA.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(
    std::shared_ptr<const ModelCheckpoint> checkpoint, const CudaBackendOptions& options);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_
