// KV pool sizing for the trace simulator, the way vLLM sizes its cache at start-up:
//
//   pool = num_gpus x GPU memory x gpu_memory_utilization - fp16 weights - num_gpus x reserve
//   reserve = peak activations of one step (estimated below) + runtime_reserve_gib
//   device blocks = pool / (block_size x KV bytes per token)
//   CPU (swap) blocks = num_gpus x swap_space_gib / block bytes  (vLLM's swap space is per GPU)
//
// Peak activations are estimated for a step of max_num_batched_tokens tokens, fp16, per token:
// residual stream and normed input (3 x hidden), q/k/v (hidden + 2 x kv_dim), attention output
// (hidden), MLP intermediates (3 x ffn gated, 2 x ffn otherwise); plus fp32 logits and
// probabilities for max_num_seqs rows. runtime_reserve_gib (default 0.5) stands for the CUDA
// context and library workspaces. For OPT-13B on an A100-40GB this leaves about 12.0 GB, 14.6k
// tokens: the paper's Orca-Max batches 7.00 requests of 2048 slots, about 14.3k tokens.
#ifndef PAGELLM_TOOLS_SIMULATE_KV_POOL_H_
#define PAGELLM_TOOLS_SIMULATE_KV_POOL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "tools/simulate/hardware.h"

namespace pagellm::sim {

struct KvPoolOptions {
  int num_gpus = 1;
  double gpu_memory_utilization = 0.9;  // in (0, 1]
  double runtime_reserve_gib = 0.5;     // per GPU, >= 0
  double swap_space_gib = 4;            // swap pool (host memory) per GPU, >= 0
  int32_t block_size = 16;              // tokens per block, > 0
  int64_t max_num_batched_tokens = 2048;
  int64_t max_num_seqs = 256;
  int64_t num_kv_blocks = 0;  // > 0 overrides the computed device block count
};

struct KvPoolPlan {
  double weight_bytes = 0;
  double activation_bytes = 0;  // total over GPUs, runtime reserve included
  double pool_bytes = 0;        // device bytes left for KV blocks (before the override)
  int64_t block_bytes = 0;
  int32_t num_device_blocks = 0;
  int32_t num_swap_blocks = 0;
};

// InvalidArgument for out-of-range options; ResourceExhausted when the weights and reserve leave
// no room for a single block (the message suggests more GPUs or a smaller model).
absl::StatusOr<KvPoolPlan> PlanKvPool(const ModelShape& model, const GpuSpec& gpu,
                                      const KvPoolOptions& options);

}  // namespace pagellm::sim

#endif  // PAGELLM_TOOLS_SIMULATE_KV_POOL_H_
