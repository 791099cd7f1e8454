// The CPU backend: LlamaModel + a KvCache in host memory + a thread pool.
#ifndef PAGELLM_WORKER_BACKEND_CPU_BACKEND_H_
#define PAGELLM_WORKER_BACKEND_CPU_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/cpu/paged_attention.h"
#include "worker/backend/backend.h"
#include "worker/model/llama_weights.h"

namespace pagellm {

struct CpuBackendOptions {
  int threads = 0;                       // 0: all hardware threads
  int64_t block_size = 16;
  int64_t num_kv_blocks = 0;             // 0: derived from kv_cache_bytes
  int64_t kv_cache_bytes = 1ll << 30;    // KV memory budget when num_kv_blocks is 0
  int64_t swap_space_bytes = 0;          // host swap pool for preempted sequences; 0: none
  int64_t max_batch_tokens = 2048;
  // "auto": fp32 when the matrices are fp32 (exact comparisons with references), else fp16.
  std::string kv_cache_dtype = "auto";   // auto | f32 | f16
};

// InvalidArgument for bad options (block size outside 1..1024, unknown dtype, a pool smaller
// than one sequence's block); ResourceExhausted if the pool cannot be allocated.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(std::unique_ptr<LlamaWeights> weights,
                                                          const CpuBackendOptions& options);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_CPU_BACKEND_H_
