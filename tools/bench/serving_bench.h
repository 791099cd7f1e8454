// RunServingBench: drives a pagellm server with benchmark requests the way vLLM's
// benchmarks/benchmark_serving.py does, and records every request.
//
//   - Requests arrive on ArrivalOffsets' schedule (request rate, burstiness, seed).
//   - At most max_concurrency are in flight; later arrivals wait, in order, for a free slot
//     (vLLM's semaphore). A request's send time, from which TTFT counts, is when it started.
//   - Each request asks for max_tokens = output_len with ignore_eos and the given temperature.
//   - An optional initial test run sends the first request alone and fails the whole run when
//     it fails (vLLM's "initial single prompt test run"); it is not part of the results.
//   - The duration runs from the first arrival until the last request has ended.
#ifndef PAGELLM_TOOLS_BENCH_SERVING_BENCH_H_
#define PAGELLM_TOOLS_BENCH_SERVING_BENCH_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/bench_dataset.h"
#include "tools/bench/bench_metrics.h"
#include "tools/bench/bench_target.h"
#include "tools/bench/request_record.h"

namespace pagellm::bench {

struct ServingBenchOptions {
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s
  double burstiness = 1.0;
  int32_t max_concurrency = 0;  // 0: unlimited
  uint64_t seed = 0;            // arrival times
  float temperature = 0.0f;
  absl::Duration request_timeout = absl::InfiniteDuration();  // per request deadline
  bool initial_test_run = true;
};

struct ServingBenchResult {
  std::vector<RequestRecord> records;  // one per request, in request order
  double duration_s = 0;
  BenchMetrics metrics;
};

// Runs `requests` against `target` and returns what each did. Failed requests are recorded, not
// returned as errors. InvalidArgument for bad options or no requests; the test request's error
// (prefixed "initial test run") when the initial test run fails.
absl::StatusOr<ServingBenchResult> RunServingBench(BenchTarget* target,
                                                   const std::vector<BenchRequest>& requests,
                                                   const ServingBenchOptions& options);

}  // namespace pagellm::bench

#endif  // PAGELLM_TOOLS_BENCH_SERVING_BENCH_H_
