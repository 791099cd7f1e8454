// pagellm-simulate: replays a request trace through the engine's Scheduler and BlockManager with a
// roofline cost model in place of the model (see cost_model.h), next to contiguous-reservation
// Orca baselines (orca_simulator.h), to reproduce the vLLM paper's (SOSP'23) Fig. 2 / Fig. 12
// comparisons at GPU scale on a CPU:
//
//   pagellm-simulate --model-shape OPT-13B --gpu A100-40GB --trace sharegpt --request-rate 2
//   pagellm-simulate --trace alpaca --request-rate 10,20,30 --csv a.csv --plot a.png
//
// Prints one row per (policy, rate): mean batched requests, the time-averaged KV pool split
// (live / reserved / internal / external / free, and live as a share of the used pool),
// throughput, mean normalized latency (s per output token) and preemptions.
//
// RESULTS with the defaults (1000 requests, seed 0; the whole run takes ~0.1 s), against the
// paper's Fig. 12 (OPT-13B, one A100-40GB; mean batched requests):
//
//   ShareGPT, 2 req/s       orca-max  orca-pow2  orca-oracle  pagellm
//     paper                     7.00       9.81        13.62    30.42
//     simulated                 6.94      10.01        12.67    16.63   (10000 requests: 6.95,
//                                                                       10.88, 13.57, 15.06)
//     live share of used KV    28.9%      42.2%        51.6%    98.6%   (paper: 20.4-38.2% for
//                                                                       Orca, 96.3% for vLLM)
//   Alpaca, 30 req/s            6.96      38.06        38.16    38.16   (rate-bound, see below)
//   Alpaca, 150 req/s           6.95      47.82        58.27   141.37
//
// The Orca numbers are memory-bound and land on the paper's (Orca-Max: a 14640-token pool holds
// 7 reservations of 2048). pagellm at 2 req/s is not: it batches what arrives (Little's law:
// 2 req/s x ~8 s per request), leaving ~36% of the pool free on average, so it is ~2.4x Orca-Max
// where the paper has 4.3x. The cause is speed, not memory: the roofline step (fp16 weights at
// full HBM bandwidth, 16.5 ms, plus KV reads and 2 ms) is about half the per-step time the
// paper's 2023 prototype implies, so a request finishes twice as fast and fewer are in flight.
// With --bandwidth-efficiency 0.5 the same trace makes pagellm memory-bound: 23.65 batched,
// 91.6% of the pool live (the Orca columns do not move). Memory-bound, pagellm's ceiling is
// about pool / (input + time-weighted output held) = 14640 / ~600 = 24 rather than the paper's
// 30, which would need ~480 tokens held per request: long requests hold KV longest, and our
// lognormal output lengths (sigma 1.0, an assumption: the paper gives means and histograms only)
// probably have a heavier tail than the real ShareGPT's.
// The same speed gap leaves Alpaca at the paper's 30 req/s rate-bound here (every policy but
// Orca-Max batches ~38); at 150 req/s the pool is contended and the ordering is the paper's.
// Orca-Oracle's live share cannot fall below half of live + reserved (a request's live KV grows
// linearly to its reservation), so ours (51.6%) is above the paper's 38.2%, whose Fig. 2 lumps
// "others" in with external fragmentation. Nothing here is fitted to the paper's numbers.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flags_util.h"
#include "common/logging.h"
#include "tools/simulate/report.h"
#include "tools/simulate/simulation.h"

ABSL_FLAG(std::string, model_shape, "OPT-13B",
          "OPT-13B, OPT-66B, OPT-175B, Llama-2-7B, Llama-2-13B, Llama-3-8B");
ABSL_FLAG(std::string, gpu, "A100-40GB", "A100-40GB, A100-80GB, H100, H200");
ABSL_FLAG(int32_t, num_gpus, 1, "tensor-parallel GPUs (memory and rates scale, comm. is free)");
ABSL_FLAG(double, gpu_memory_utilization, 0.9, "fraction of GPU memory the engine may use");
ABSL_FLAG(double, runtime_reserve_gib, 0.5, "per-GPU memory for CUDA context and workspaces");
ABSL_FLAG(int64_t, num_kv_blocks, 0, "device KV blocks (0: from memory, see kv_pool.h)");
ABSL_FLAG(double, swap_space, 4, "CPU swap space in GiB per GPU");
ABSL_FLAG(int32_t, block_size, 16, "tokens per KV block");
ABSL_FLAG(int64_t, max_num_seqs, 256, "sequences running at once");
ABSL_FLAG(int64_t, max_num_batched_tokens, 0, "tokens per step (0: the model's max length)");
ABSL_FLAG(std::string, preemption_mode, "auto", "auto, recompute or swap");
ABSL_FLAG(bool, enable_prefix_caching, false, "prefix caching (random prompts never hit)");
ABSL_FLAG(double, step_overhead_ms, 2.0, "fixed cost of every step");
ABSL_FLAG(double, flops_efficiency, 1.0, "achieved fraction of peak FLOP/s");
ABSL_FLAG(double, bandwidth_efficiency, 1.0, "achieved fraction of HBM bandwidth");
ABSL_FLAG(std::string, trace, "sharegpt", "sharegpt, alpaca or FILE.jsonl");
ABSL_FLAG(std::string, request_rate, "2", "requests/s, a comma list sweeps (inf: all at 0)");
ABSL_FLAG(int64_t, num_requests, 0, "requests (0: 1000 synthetic, or the whole file)");
ABSL_FLAG(uint64_t, seed, 0, "trace and token seed");
ABSL_FLAG(std::string, policies, "pagellm,orca-max,orca-pow2,orca-oracle", "policies to compare");
ABSL_FLAG(std::string, csv, "", "write the results as CSV here");
ABSL_FLAG(std::string, plot, "",
          "draw the results as PNG here (tools/simulate/plot_simulation.py)");

namespace {

using pagellm::sim::PolicyResult;

int Die(const absl::Status& s) {
  std::fprintf(stderr, "pagellm-simulate: %s\n", s.ToString().c_str());
  return 1;
}

absl::StatusOr<std::vector<double>> ParseRates(const std::string& list) {
  std::vector<double> rates;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    double r = 0;
    if (!absl::SimpleAtod(part, &r) || !(r > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad --request-rate entry '", std::string(part), "'"));
    }
    rates.push_back(r);
  }
  if (rates.empty()) return absl::InvalidArgumentError("--request-rate is empty");
  return rates;
}

// Runs the plotting script with the project's .venv Python, or says how to.
void Plot(const std::string& csv, const std::string& png) {
  const std::filesystem::path root = PAGELLM_SOURCE_DIR;
  const std::string python = (root / ".venv/bin/python").string();
  const std::string cmd =
      absl::StrCat(python, " ", (root / "tools/simulate/plot_simulation.py").string(), " '", csv,
                   "' '", png, "'");
  if (!std::filesystem::exists(python)) {
    std::printf("no %s (run tools/setup.sh); to plot: %s\n", python.c_str(), cmd.c_str());
    return;
  }
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "pagellm-simulate: plotting failed: %s\n", cmd.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "simulate_main");  // --help lists this tool's flags
  };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "Replays a request trace through the scheduler with a GPU cost "
      "model; compares paged KV memory with contiguous reservation. Flags take dashes or "
      "underscores (--request-rate, --request_rate).");
  pagellm::cli::ParseFlags(argc, argv);
  pagellm::InitLogging("warn");

  pagellm::sim::SimulationSetup setup;
  setup.model = absl::GetFlag(FLAGS_model_shape);
  setup.gpu = absl::GetFlag(FLAGS_gpu);
  setup.num_gpus = absl::GetFlag(FLAGS_num_gpus);
  setup.gpu_memory_utilization = absl::GetFlag(FLAGS_gpu_memory_utilization);
  setup.runtime_reserve_gib = absl::GetFlag(FLAGS_runtime_reserve_gib);
  setup.swap_space_gib = absl::GetFlag(FLAGS_swap_space);
  setup.num_kv_blocks = absl::GetFlag(FLAGS_num_kv_blocks);
  setup.block_size = absl::GetFlag(FLAGS_block_size);
  setup.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  setup.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  setup.preemption_mode = absl::GetFlag(FLAGS_preemption_mode);
  setup.enable_prefix_caching = absl::GetFlag(FLAGS_enable_prefix_caching);
  setup.cost.step_overhead_s = absl::GetFlag(FLAGS_step_overhead_ms) / 1000.0;
  setup.cost.flops_efficiency = absl::GetFlag(FLAGS_flops_efficiency);
  setup.cost.bandwidth_efficiency = absl::GetFlag(FLAGS_bandwidth_efficiency);
  setup.seed = absl::GetFlag(FLAGS_seed);

  pagellm::sim::KvPoolPlan plan;
  absl::StatusOr<pagellm::sim::SimConfig> config = pagellm::sim::BuildConfig(setup, &plan);
  if (!config.ok()) return Die(config.status());
  absl::StatusOr<std::vector<pagellm::sim::Policy>> policies =
      pagellm::sim::ParsePolicies(absl::GetFlag(FLAGS_policies));
  if (!policies.ok()) return Die(policies.status());
  absl::StatusOr<std::vector<double>> rates = ParseRates(absl::GetFlag(FLAGS_request_rate));
  if (!rates.ok()) return Die(rates.status());

  const std::string trace_name = absl::GetFlag(FLAGS_trace);
  const bool is_file = absl::EndsWith(trace_name, ".jsonl");
  const int64_t num_requests = absl::GetFlag(FLAGS_num_requests);
  std::printf(
      "%s on %d x %s: weights %.1f GB, KV pool %d blocks x %d = %lld tokens (%.2f GB, "
      "%.0f KiB/token), swap %d blocks; max_num_batched_tokens %lld, max_num_seqs %lld\n",
      config->model.name.c_str(), setup.num_gpus, config->gpu.name.c_str(), plan.weight_bytes / 1e9,
      config->num_device_blocks, config->block_size, static_cast<long long>(config->pool_tokens()),
      static_cast<double>(config->pool_tokens() * config->model.KvBytesPerToken()) / 1e9,
      static_cast<double>(config->model.KvBytesPerToken()) / 1024.0, config->num_swap_blocks,
      static_cast<long long>(config->scheduler.max_num_batched_tokens),
      static_cast<long long>(config->scheduler.max_num_seqs));

  std::vector<PolicyResult> results;
  for (double rate : *rates) {
    pagellm::sim::TraceOptions to;
    to.num_requests = num_requests > 0 ? num_requests : (is_file ? 0 : 1000);
    to.request_rate = rate;
    to.seed = setup.seed;
    to.max_len = config->model.max_len;
    bool arrivals_given = false;
    absl::StatusOr<std::vector<pagellm::sim::TraceRequest>> trace =
        pagellm::sim::MakeTrace(trace_name, to, &arrivals_given);
    if (!trace.ok()) return Die(trace.status());
    double label = rate;
    if (arrivals_given && trace->size() > 1) {
      const double span = trace->back().arrival_s - trace->front().arrival_s;
      label = span > 0 ? static_cast<double>(trace->size() - 1) / span
                       : std::numeric_limits<double>::infinity();
    }
    double in = 0, out = 0;
    for (const auto& r : *trace) in += r.input_len, out += r.output_len;
    std::printf("trace %s: %zu requests, mean input %.1f, mean output %.1f, rate %.2f/s\n",
                trace_name.c_str(), trace->size(), in / trace->size(), out / trace->size(), label);
    for (pagellm::sim::Policy p : *policies) {
      absl::StatusOr<PolicyResult> r = pagellm::sim::RunPolicy(p, *config, *trace, label);
      if (!r.ok()) return Die(r.status());
      results.push_back(*r);
    }
    if (arrivals_given) break;  // the file fixes the load: one run
  }
  std::printf("\n%s", pagellm::sim::FormatTable(results).c_str());

  std::string csv = absl::GetFlag(FLAGS_csv);
  const std::string png = absl::GetFlag(FLAGS_plot);
  if (csv.empty() && !png.empty()) csv = png + ".csv";
  if (!csv.empty()) {
    const pagellm::sim::RunLabel label{config->model.name, config->gpu.name, trace_name};
    if (absl::Status s = pagellm::sim::WriteCsv(csv, label, results); !s.ok()) return Die(s);
    std::printf("wrote %s\n", csv.c_str());
  }
  if (!png.empty()) Plot(csv, png);
  return 0;
}
