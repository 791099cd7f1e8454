#include "tools/simulate/simulation.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tools/simulate/orca_simulator.h"
#include "tools/simulate/paged_simulator.h"

namespace pagellm::sim {

absl::StatusOr<std::vector<Policy>> ParsePolicies(const std::string& list) {
  std::vector<Policy> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(part));
    if (name == "pagellm") {
      out.push_back(Policy::kPagellm);
    } else if (name == "orca-max") {
      out.push_back(Policy::kOrcaMax);
    } else if (name == "orca-pow2") {
      out.push_back(Policy::kOrcaPow2);
    } else if (name == "orca-oracle") {
      out.push_back(Policy::kOrcaOracle);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown policy '", name, "': pagellm, orca-max, orca-pow2, orca-oracle"));
    }
  }
  if (out.empty()) return absl::InvalidArgumentError("no policy given");
  return out;
}

std::string PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kPagellm:
      return "pagellm";
    case Policy::kOrcaMax:
      return "orca-max";
    case Policy::kOrcaPow2:
      return "orca-pow2";
    case Policy::kOrcaOracle:
      return "orca-oracle";
  }
  return "?";
}

absl::StatusOr<SimConfig> BuildConfig(const SimulationSetup& s, KvPoolPlan* plan_out) {
  SimConfig c;
  absl::StatusOr<ModelShape> model = LookupModel(s.model);
  if (!model.ok()) return model.status();
  absl::StatusOr<GpuSpec> gpu = LookupGpu(s.gpu);
  if (!gpu.ok()) return gpu.status();
  absl::StatusOr<PreemptionMode> mode = ParsePreemptionMode(s.preemption_mode);
  if (!mode.ok()) return mode.status();
  if (s.max_num_seqs <= 0 || s.max_num_batched_tokens < 0 || s.block_size <= 0 ||
      s.cost.flops_efficiency <= 0 || s.cost.bandwidth_efficiency <= 0 ||
      s.cost.step_overhead_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad settings: max_num_seqs ", s.max_num_seqs, ", max_num_batched_tokens ",
                     s.max_num_batched_tokens, ", block_size ", s.block_size, ", efficiencies ",
                     s.cost.flops_efficiency, "/", s.cost.bandwidth_efficiency, ", step overhead ",
                     s.cost.step_overhead_s));
  }
  c.model = *model;
  c.gpu = *gpu;
  c.cost = s.cost;
  c.cost.num_gpus = s.num_gpus;
  c.block_size = s.block_size;
  c.scheduler.max_num_seqs = s.max_num_seqs;
  c.scheduler.max_num_batched_tokens =
      s.max_num_batched_tokens > 0 ? s.max_num_batched_tokens : c.model.max_len;
  c.scheduler.preemption_mode = *mode;
  c.enable_prefix_caching = s.enable_prefix_caching;
  c.seed = s.seed;

  KvPoolOptions po;
  po.num_gpus = s.num_gpus;
  po.gpu_memory_utilization = s.gpu_memory_utilization;
  po.runtime_reserve_gib = s.runtime_reserve_gib;
  po.swap_space_gib = s.swap_space_gib;
  po.block_size = s.block_size;
  po.max_num_batched_tokens = c.scheduler.max_num_batched_tokens;
  po.max_num_seqs = s.max_num_seqs;
  po.num_kv_blocks = s.num_kv_blocks;
  absl::StatusOr<KvPoolPlan> plan = PlanKvPool(c.model, c.gpu, po);
  if (!plan.ok()) return plan.status();
  c.num_device_blocks = plan->num_device_blocks;
  c.num_swap_blocks = plan->num_swap_blocks;
  if (plan_out != nullptr) *plan_out = *plan;
  return c;
}

absl::StatusOr<std::vector<TraceRequest>> MakeTrace(const std::string& trace,
                                                    const TraceOptions& options,
                                                    bool* arrivals_given) {
  if (arrivals_given != nullptr) *arrivals_given = false;
  if (absl::EndsWith(trace, ".jsonl")) return LoadTraceJsonl(trace, options, arrivals_given);
  absl::StatusOr<SyntheticWorkload> workload = LookupWorkload(trace);
  if (!workload.ok()) return workload.status();
  return GenerateTrace(*workload, options);
}

absl::StatusOr<PolicyResult> RunPolicy(Policy policy, const SimConfig& config,
                                       const std::vector<TraceRequest>& trace,
                                       double request_rate) {
  switch (policy) {
    case Policy::kPagellm:
      return SimulatePaged(config, trace, request_rate);
    case Policy::kOrcaMax:
      return SimulateOrca(Reservation::kMax, config, trace, request_rate);
    case Policy::kOrcaPow2:
      return SimulateOrca(Reservation::kPow2, config, trace, request_rate);
    case Policy::kOrcaOracle:
      return SimulateOrca(Reservation::kOracle, config, trace, request_rate);
  }
  return absl::InvalidArgumentError("unknown policy");
}

}  // namespace pagellm::sim
