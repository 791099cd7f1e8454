// The CPU backend: a checkpoint packed for the CPU kernels (LlamaWeights), the forward pass
// (LlamaModel), a paged KV pool and a swap pool in host memory (KvCache), a thread pool, and the
// reference sampler. The default backend, and what CI tests.
#ifndef PAGELLM_WORKER_BACKEND_CPU_CPU_BACKEND_H_
#define PAGELLM_WORKER_BACKEND_CPU_CPU_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/backend/forward_batch.h"
#include "worker/dist/communicator.h"
#include "worker/model/lora_adapter.h"
#include "worker/model/model_checkpoint.h"

namespace pagellm {

struct CpuBackendOptions {
  int threads = 0;  // 0: all hardware threads
  int64_t block_size = 16;
  int64_t num_kv_blocks = 0;           // 0: derived from kv_cache_bytes
  int64_t kv_cache_bytes = 1ll << 30;  // KV memory budget when num_kv_blocks is 0
  int64_t swap_space_bytes = 0;        // swap pool for preempted sequences; 0: none
  int64_t max_batch_tokens = 2048;
  // Weight matrices stored as F32/F16/BF16: "auto" or "float32" run them in fp32 (exact against
  // the fp32 references); "bfloat16" rounds them to bfloat16 at load (half the memory, the bf16
  // kernel). Quantized matrices stay quantized either way.
  std::string dtype = "auto";  // auto | float32 | bfloat16
  // "auto": fp32 when the matrices run in fp32 (exact comparisons with references), else fp16.
  std::string kv_cache_dtype = "auto";  // auto | f32 | f16 | fp8 (= fp8_e4m3) | fp8_e5m2
  // Check every batch against forward_batch.h's contract before running it.
  bool validate_batches = ValidateBatchesByDefault();
  // Tensor parallelism: this backend is rank `shard.rank` of a group whose collectives run over
  // `communicator` (borrowed; it must outlive the backend; null for a single rank). The KV pool
  // holds this rank's KV heads. Every rank must be given the same batches and copies in the
  // same order; each returns the same logits and samples.
  ShardSpec shard;
  Communicator* communicator = nullptr;
  // LoRA adapters served beside the base model, whole (each rank applies its slice); their
  // names are adapter_names(), in this order. Each must fit the checkpoint's shapes.
  std::vector<std::shared_ptr<const LoraAdapter>> lora_adapters;
  // Adapter slots (adapter_names().size()): lora_adapters fill the first ones; the others take
  // adapters loaded while serving (SetAdapter). Fewer than lora_adapters: exactly those.
  int64_t max_loras = 0;
};

// Packs the checkpoint (which the backend keeps alive) and allocates the pools. InvalidArgument
// for bad options (block size outside 1..1024, unknown dtype, a pool that holds no block) or a
// tensor the CPU cannot use; ResourceExhausted if a pool cannot be allocated.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    std::shared_ptr<const ModelCheckpoint> checkpoint, const CpuBackendOptions& options);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_CPU_CPU_BACKEND_H_
