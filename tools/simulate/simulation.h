// The simulator's library entry points: resolve command-line-level settings into a SimConfig,
// build a trace, and run one policy on it. simulate_main.cc is a thin CLI over these; tests call
// them directly.
#ifndef PAGELLM_TOOLS_SIMULATE_SIMULATION_H_
#define PAGELLM_TOOLS_SIMULATE_SIMULATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/simulate/kv_pool.h"
#include "tools/simulate/sim_config.h"
#include "tools/simulate/sim_metrics.h"
#include "tools/simulate/trace.h"

namespace pagellm::sim {

enum class Policy { kPagellm, kOrcaMax, kOrcaPow2, kOrcaOracle };

// "pagellm", "orca-max", "orca-pow2", "orca-oracle" (case-insensitive), comma-separated.
// InvalidArgument for an unknown or empty list.
absl::StatusOr<std::vector<Policy>> ParsePolicies(const std::string& list);
std::string PolicyName(Policy policy);

// Settings as the command line gives them. Defaults: the vLLM paper's OPT-13B on one A100-40GB.
struct SimulationSetup {
  std::string model = "OPT-13B";
  std::string gpu = "A100-40GB";
  int num_gpus = 1;
  double gpu_memory_utilization = 0.9;
  double runtime_reserve_gib = 0.5;
  double swap_space_gib = 4;
  int64_t num_kv_blocks = 0;  // > 0 overrides the computed pool
  int32_t block_size = 16;
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 0;  // 0: the model's max length
  std::string preemption_mode = "auto";
  bool enable_prefix_caching = false;
  CostModelOptions cost;  // num_gpus is taken from above
  uint64_t seed = 0;
};

// Resolves names and sizes the KV pool. NotFound for unknown names, InvalidArgument for bad
// values, ResourceExhausted when the model does not fit. `plan` (optional) receives the sizing.
absl::StatusOr<SimConfig> BuildConfig(const SimulationSetup& setup, KvPoolPlan* plan = nullptr);

// "sharegpt" / "alpaca" (synthetic, see trace.h) or a path ending in .jsonl. Set
// options.max_len to the model's max length. `arrivals_given` (optional) is set when a file fixed
// the arrival times. Errors as GenerateTrace / LoadTraceJsonl.
absl::StatusOr<std::vector<TraceRequest>> MakeTrace(const std::string& trace,
                                                    const TraceOptions& options,
                                                    bool* arrivals_given = nullptr);

// Runs one policy over the trace; the result is labelled with `request_rate`.
absl::StatusOr<PolicyResult> RunPolicy(Policy policy, const SimConfig& config,
                                       const std::vector<TraceRequest>& trace, double request_rate);

}  // namespace pagellm::sim

#endif  // PAGELLM_TOOLS_SIMULATE_SIMULATION_H_
