// The numbers vLLM's benchmarks/benchmark_serving.py reports, computed from RequestRecords:
// request and token throughput; TTFT, TPOT, ITL and end-to-end latency statistics.
//
// Definitions (successful requests only, as vLLM):
//   TTFT  first token arrival - send.
//   TPOT  (e2e latency - TTFT) / (output tokens - 1), for requests with more than one token.
//   ITL   gaps between consecutive token arrivals of a request, over all requests; tokens that
//         arrive in one message contribute gaps of 0.
//   E2EL  final status - send.
// Percentiles interpolate linearly between order statistics, like numpy.percentile's default.
// Statistics of an empty sample are all 0 (vLLM's `np.mean(x or 0)`).
#ifndef PAGELLM_TOOLS_BENCH_BENCH_METRICS_H_
#define PAGELLM_TOOLS_BENCH_BENCH_METRICS_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "tools/bench/request_record.h"

namespace pagellm::bench {

// The p-th percentile (p in [0, 100]) of `sorted` (ascending), numpy's "linear" method:
// rank = p / 100 * (n - 1), interpolated between its neighbours. 0 for an empty sample.
[[nodiscard]] double Percentile(std::span<const double> sorted, double p);

// Summary of one latency sample, in milliseconds. std is the population deviation (numpy's).
struct LatencyStats {
  double mean_ms = 0, std_ms = 0, median_ms = 0, p90_ms = 0, p95_ms = 0, p99_ms = 0;
};

// Sorts `values_ms` and summarizes it.
[[nodiscard]] LatencyStats Summarize(std::vector<double> values_ms);

struct BenchMetrics {
  int64_t completed = 0;  // successful requests
  int64_t failed = 0;
  double duration_s = 0;
  int64_t total_input_tokens = 0;     // of successful requests
  int64_t total_output_tokens = 0;    // of successful requests
  double request_throughput = 0;      // completed / duration
  double output_throughput = 0;       // output tokens / duration
  double total_token_throughput = 0;  // (input + output tokens) / duration
  int64_t peak_concurrency = 0;       // most requests in flight at once (client side)
  LatencyStats ttft, tpot, itl, e2el;
  // Failed requests by status code name ("UNAVAILABLE") and one message per code.
  std::map<std::string, int64_t> errors_by_code;
  std::map<std::string, std::string> error_examples;
};

// Metrics of one run that took `duration_s` seconds (> 0).
[[nodiscard]] BenchMetrics ComputeMetrics(std::span<const RequestRecord> records,
                                          double duration_s);

// "OK", "UNAVAILABLE", ... (gRPC's spelling).
[[nodiscard]] std::string StatusCodeName(absl::StatusCode code);

}  // namespace pagellm::bench

#endif  // PAGELLM_TOOLS_BENCH_BENCH_METRICS_H_
