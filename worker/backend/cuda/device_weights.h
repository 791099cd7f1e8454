// DeviceWeights: a checkpoint's weights (this rank's shard of them, cuda_backend.h's plan) in one
// device allocation, laid out for the forward pass:
// Q/K/V of a layer as one [q_dim + 2 kv_dim, hidden] matrix (one GEMM), gate/up as one
// [2 intermediate, hidden] matrix, matrices and embeddings in the compute type, norms and biases
// in fp32. Tied embeddings share the embedding table with the LM head.
//
// Built once at start; immutable and thread-safe to read afterwards.
#ifndef PAGELLM_WORKER_BACKEND_CUDA_DEVICE_WEIGHTS_H_
#define PAGELLM_WORKER_BACKEND_CUDA_DEVICE_WEIGHTS_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/paged_kv.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/device_memory.h"
#include "worker/model/model_checkpoint.h"

namespace pagellm::cuda {

struct DeviceLayerWeights {
  const void* qkv = nullptr;         // [q_dim + 2 kv_dim][hidden]
  const float* qkv_bias = nullptr;   // [q_dim + 2 kv_dim], or null
  const void* o = nullptr;           // [hidden][q_dim]
  const void* gate_up = nullptr;     // [2 intermediate][hidden]: gate rows, then up rows
  const void* down = nullptr;        // [hidden][intermediate]
  const float* attn_norm = nullptr;  // [hidden]
  const float* ffn_norm = nullptr;   // [hidden]
};

struct DeviceWeights {
  kernels::KvDtype dtype = kernels::KvDtype::kBF16;  // of every matrix and the embedding
  // The vocabulary rows this rank holds of the embedding and LM head (all of them for a single
  // rank, or when the tensor-parallel size does not divide the vocabulary).
  int64_t vocab_begin = 0;
  int64_t vocab_rows = 0;
  const void* embedding = nullptr;    // [vocab_rows][hidden]
  const void* lm_head = nullptr;      // [vocab_rows][hidden]; == embedding when tied
  const float* final_norm = nullptr;  // [hidden]
  std::vector<DeviceLayerWeights> layers;
  // rope_freqs.weight (GGUF Llama 3) on the host, for the RoPE table; empty when absent.
  std::vector<float> rope_freq_factors;
  int64_t bytes = 0;                // device bytes of all of it
  int64_t converted_tensors = 0;    // tensors widened, narrowed or dequantized on the way
  int64_t dequantized_tensors = 0;  // of those, the quantized GGUF ones
  DeviceBuffer storage;
};

// Uploads `plan` (PlanCudaUpload of `checkpoint`), converting on the device where the stored type
// differs (quantized blocks are dequantized on the host first). ResourceExhausted when the
// weights do not fit; InvalidArgument for a tensor the plan cannot place.
absl::StatusOr<std::unique_ptr<DeviceWeights>> UploadWeights(const ModelCheckpoint& checkpoint,
                                                             const CudaUploadPlan& plan,
                                                             cudaStream_t stream);

}  // namespace pagellm::cuda

#endif  // PAGELLM_WORKER_BACKEND_CUDA_DEVICE_WEIGHTS_H_
