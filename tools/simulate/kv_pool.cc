#include "tools/simulate/kv_pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pagellm::sim {

absl::StatusOr<KvPoolPlan> PlanKvPool(const ModelShape& model, const GpuSpec& gpu,
                                      const KvPoolOptions& o) {
  if (o.num_gpus <= 0 || !(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1) ||
      o.runtime_reserve_gib < 0 || o.swap_space_gib < 0 || o.block_size <= 0 ||
      o.max_num_batched_tokens <= 0 || o.max_num_seqs <= 0 || o.num_kv_blocks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad KV pool options: num_gpus ", o.num_gpus, ", gpu_memory_utilization ",
                     o.gpu_memory_utilization, ", swap_space_gib ", o.swap_space_gib,
                     ", block_size ", o.block_size, ", num_kv_blocks ", o.num_kv_blocks));
  }
  KvPoolPlan plan;
  plan.weight_bytes = static_cast<double>(model.TotalParams() * kFp16Bytes);
  const int64_t per_token = 3 * model.hidden + model.hidden + 2 * model.kv_dim() + model.hidden +
                            (model.gated_ffn ? 3 : 2) * model.ffn;
  const double activations =
      static_cast<double>(o.max_num_batched_tokens * per_token * kFp16Bytes) +
      static_cast<double>(o.max_num_seqs * model.vocab) * 4.0 * 2.0;
  plan.activation_bytes = o.num_gpus * (activations + o.runtime_reserve_gib * kGiB);
  plan.pool_bytes = o.num_gpus * gpu.memory_bytes * o.gpu_memory_utilization - plan.weight_bytes -
                    plan.activation_bytes;
  plan.block_bytes = o.block_size * model.KvBytesPerToken();

  const double blocks = std::floor(plan.pool_bytes / static_cast<double>(plan.block_bytes));
  if (o.num_kv_blocks > 0) {
    plan.num_device_blocks = static_cast<int32_t>(
        std::min<int64_t>(o.num_kv_blocks, std::numeric_limits<int32_t>::max()));
  } else if (blocks < 1) {
    return absl::ResourceExhaustedError(
        absl::StrCat(model.name, " on ", o.num_gpus, " x ", gpu.name, ": fp16 weights (",
                     plan.weight_bytes / 1e9,
                     " GB) and activations leave no room for KV blocks; use more "
                     "GPUs (--num-gpus), a larger --gpu-memory-utilization or a bigger GPU"));
  } else {
    plan.num_device_blocks =
        static_cast<int32_t>(std::min<double>(blocks, std::numeric_limits<int32_t>::max()));
  }
  const double swap_bytes = o.num_gpus * o.swap_space_gib * kGiB;
  plan.num_swap_blocks = static_cast<int32_t>(
      std::min<double>(std::floor(swap_bytes / static_cast<double>(plan.block_bytes)),
                       std::numeric_limits<int32_t>::max()));
  return plan;
}

}  // namespace pagellm::sim
