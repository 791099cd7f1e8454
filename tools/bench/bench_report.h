// How `pagellm bench` prints its results: vLLM benchmark_serving.py's text table, and the same
// numbers as one JSON object with vLLM's key names (mean_ttft_ms, p99_itl_ms, ...).
#ifndef PAGELLM_TOOLS_BENCH_BENCH_REPORT_H_
#define PAGELLM_TOOLS_BENCH_BENCH_REPORT_H_

#include <cstdint>
#include <span>
#include <string>

#include "nlohmann/json.hpp"
#include "tools/bench/bench_metrics.h"
#include "tools/bench/request_record.h"

namespace pagellm::bench {

// What was run, printed above the numbers.
struct RunInfo {
  std::string server;    // host:port
  std::string endpoint;  // "router" or "worker"
  std::string model;     // ModelInfo.model_name
  std::string dataset;   // "random" or "sharegpt-like"
  int64_t num_prompts = 0;
  double request_rate = 0;  // requests/s; infinity: all at once
  double burstiness = 1.0;
  int32_t max_concurrency = 0;  // 0: unlimited
  uint64_t seed = 0;
};

// The text table, newline-terminated.
[[nodiscard]] std::string FormatReport(const RunInfo& info, const BenchMetrics& m);

// The JSON object. With `detailed` records it adds vLLM's per-request arrays: input_lens,
// output_lens, ttfts and itls (seconds; itls one list per request), errors ("" on success).
[[nodiscard]] nlohmann::json ReportJson(const RunInfo& info, const BenchMetrics& m,
                                        std::span<const RequestRecord> detailed = {});

}  // namespace pagellm::bench

#endif  // PAGELLM_TOOLS_BENCH_BENCH_REPORT_H_
