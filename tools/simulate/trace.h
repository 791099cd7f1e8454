// Request traces for the simulator: synthetic ShareGPT-like and Alpaca-like workloads with
// Poisson arrivals (the vLLM paper's setup, §6.1), or a JSONL file.
//
// Synthetic lengths are lognormal, clipped so that 1 <= input, 1 <= output and
// input + output <= max_len. The paper gives only the means (ShareGPT 161.31 input / 337.99
// output tokens, Alpaca 19.31 / 58.45) and histograms; the spreads (sigma of log-length) are
// our reading of those histograms: ShareGPT 1.0 / 1.0 (long tails), Alpaca 0.6 / 1.0. mu is
// solved so that the mean of the clipped distribution equals the paper's mean.
//
// Lengths come from one random stream and the unit-rate exponential gaps from another, so a
// sweep over request rates replays the same requests, only closer together.
#ifndef PAGELLM_TOOLS_SIMULATE_TRACE_H_
#define PAGELLM_TOOLS_SIMULATE_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pagellm::sim {

struct TraceRequest {
  double arrival_s = 0;  // non-decreasing along the trace
  int64_t input_len = 0;
  int64_t output_len = 0;
};

struct LengthDistribution {
  double mean = 0;   // of the clipped lengths
  double sigma = 0;  // of log-length
};

struct SyntheticWorkload {
  std::string name;
  LengthDistribution input;
  LengthDistribution output;
};

// "sharegpt" or "alpaca" (case-insensitive). NotFound otherwise.
absl::StatusOr<SyntheticWorkload> LookupWorkload(const std::string& name);

struct TraceOptions {
  int64_t num_requests = 1000;
  double request_rate = 1;  // requests/s; +infinity: every request arrives at 0
  uint64_t seed = 0;
  int64_t max_len = 2048;  // input + output <= max_len, >= 2
};

// A synthetic trace. InvalidArgument for a non-positive rate, count or max_len < 2.
absl::StatusOr<std::vector<TraceRequest>> GenerateTrace(const SyntheticWorkload& workload,
                                                        const TraceOptions& options);

// Reads lines {"arrival_s": 1.5, "input_len": 100, "output_len": 20} ("arrival_s" optional: when
// every line omits it, arrivals are Poisson at options.request_rate from options.seed). At most
// options.num_requests lines (0: all). Sorted by arrival. NotFound for a missing file,
// InvalidArgument (with the line number) for bad JSON, lengths < 1, input + output > max_len, or
// a file that gives arrivals on some lines only. `arrivals_given` (optional) is set to whether the
// file gave the arrivals (then options.request_rate played no part).
absl::StatusOr<std::vector<TraceRequest>> LoadTraceJsonl(const std::string& path,
                                                         const TraceOptions& options,
                                                         bool* arrivals_given = nullptr);

// The mean of exp(N(mu, sigma^2)) clipped to [lo, hi]: used to solve mu, exposed for tests.
double ClippedLognormalMean(double mu, double sigma, double lo, double hi);

}  // namespace pagellm::sim

#endif  // PAGELLM_TOOLS_SIMULATE_TRACE_H_
