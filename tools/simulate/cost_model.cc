#include "tools/simulate/cost_model.h"

#include <algorithm>

#include "common/logging.h"

namespace pagellm::sim {

CostModel::CostModel(const ModelShape& model, const GpuSpec& gpu, const CostModelOptions& options)
    : linear_flops_per_token_(2.0 * static_cast<double>(model.NonEmbeddingParams())),
      lm_head_flops_(2.0 * static_cast<double>(model.vocab * model.hidden)),
      attention_flops_per_pair_(4.0 * static_cast<double>(model.num_layers * model.hidden)),
      weight_bytes_(static_cast<double>((model.NonEmbeddingParams() + model.vocab * model.hidden) *
                                        kFp16Bytes)),
      kv_bytes_per_token_(static_cast<double>(model.KvBytesPerToken())),
      flops_per_s_(gpu.peak_flops * options.num_gpus * options.flops_efficiency),
      hbm_bytes_per_s_(gpu.hbm_bandwidth * options.num_gpus * options.bandwidth_efficiency),
      pcie_bytes_per_s_(gpu.pcie_bandwidth * options.num_gpus),
      overhead_s_(options.step_overhead_s) {
  PAGELLM_CHECK(flops_per_s_ > 0 && hbm_bytes_per_s_ > 0 && pcie_bytes_per_s_ > 0,
                "cost model of {} on {} has a zero rate (num_gpus {}, efficiencies {} {})",
                model.name, gpu.name, options.num_gpus, options.flops_efficiency,
                options.bandwidth_efficiency);
}

void CostModel::AddSequence(StepCost* cost, int64_t num_tokens, int64_t context_before,
                            bool sample) const {
  const double n = static_cast<double>(num_tokens);
  const double c = static_cast<double>(context_before);
  // Token i (1-based) of the chunk attends to c + i positions: sum = n*c + n(n+1)/2.
  const double pairs = n * c + n * (n + 1) / 2;
  cost->flops += linear_flops_per_token_ * n + attention_flops_per_pair_ * pairs +
                 (sample ? lm_head_flops_ : 0.0);
  cost->hbm_bytes += (c + n) * kv_bytes_per_token_ + n * kv_bytes_per_token_;
  cost->tokens += num_tokens;
}

void CostModel::AddCopies(StepCost* cost, int64_t pcie_blocks, int64_t device_blocks,
                          int64_t block_size) const {
  const double block_bytes = static_cast<double>(block_size) * kv_bytes_per_token_;
  cost->pcie_bytes += static_cast<double>(pcie_blocks) * block_bytes;
  cost->hbm_bytes += 2.0 * static_cast<double>(device_blocks) * block_bytes;
}

double CostModel::Seconds(const StepCost& cost) const {
  double s = cost.pcie_bytes / pcie_bytes_per_s_;
  if (cost.tokens > 0) {
    s += std::max(cost.flops / flops_per_s_, (weight_bytes_ + cost.hbm_bytes) / hbm_bytes_per_s_);
    s += overhead_s_;
  } else {
    s += cost.hbm_bytes / hbm_bytes_per_s_;
  }
  return s;
}

}  // namespace pagellm::sim
