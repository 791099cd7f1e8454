// SimConfig: everything a simulated engine needs besides the trace, resolved from names and
// sizes (see simulation.h for building one from command-line-level settings). Plain value type.
#ifndef PAGELLM_TOOLS_SIMULATE_SIM_CONFIG_H_
#define PAGELLM_TOOLS_SIMULATE_SIM_CONFIG_H_

#include <cstdint>

#include "tools/simulate/cost_model.h"
#include "tools/simulate/hardware.h"
#include "worker/engine/scheduler.h"

namespace pagellm::sim {

struct SimConfig {
  ModelShape model;
  GpuSpec gpu;
  CostModelOptions cost;
  int32_t num_device_blocks = 0;  // KV pool; contiguous policies get the same token slots
  int32_t num_swap_blocks = 0;    // swap space (paged policy only)
  int32_t block_size = 16;
  // max_num_batched_tokens and max_num_seqs apply to every policy; preemption_mode to paged.
  SchedulerOptions scheduler;
  bool enable_prefix_caching = false;
  double watermark = 0.01;  // BlockManager admission watermark (vLLM's default)
  uint64_t seed = 0;        // synthetic token ids

  [[nodiscard]] int64_t pool_tokens() const {
    return static_cast<int64_t>(num_device_blocks) * block_size;
  }
};

}  // namespace pagellm::sim

#endif  // PAGELLM_TOOLS_SIMULATE_SIM_CONFIG_H_
