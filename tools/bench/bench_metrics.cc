#include "tools/bench/bench_metrics.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace pagellm::bench {
namespace {

// Most requests in flight at once, from the send and end times; a request that ends at the
// instant another is sent does not overlap it.
int64_t PeakConcurrency(std::span<const RequestRecord> records) {
  std::vector<std::pair<int64_t, int>> events;
  events.reserve(2 * records.size());
  for (const RequestRecord& r : records) {
    if (r.send_ns < 0 || r.end_ns < 0) continue;
    events.emplace_back(r.send_ns, +1);
    events.emplace_back(r.end_ns, -1);
  }
  std::sort(events.begin(), events.end());  // -1 sorts before +1 at equal times
  int64_t now = 0, peak = 0;
  for (const auto& [t, delta] : events) peak = std::max(peak, now += delta);
  return peak;
}

}  // namespace

double Percentile(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0.0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

LatencyStats Summarize(std::vector<double> v) {
  LatencyStats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean_ms = sum / static_cast<double>(v.size());
  double sq = 0;
  for (double x : v) sq += (x - s.mean_ms) * (x - s.mean_ms);
  s.std_ms = std::sqrt(sq / static_cast<double>(v.size()));
  s.median_ms = Percentile(v, 50);
  s.p90_ms = Percentile(v, 90);
  s.p95_ms = Percentile(v, 95);
  s.p99_ms = Percentile(v, 99);
  return s;
}

std::string StatusCodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

BenchMetrics ComputeMetrics(std::span<const RequestRecord> records, double duration_s) {
  BenchMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const RequestRecord& r : records) {
    if (!r.success()) {
      ++m.failed;
      const std::string code = StatusCodeName(r.code);
      ++m.errors_by_code[code];
      m.error_examples.emplace(code, r.error);  // keeps the first
      continue;
    }
    ++m.completed;
    m.total_input_tokens += r.prompt_len;
    m.total_output_tokens += r.output_tokens();
    ttft.push_back(r.ttft_s() * 1e3);
    e2el.push_back(r.e2el_s() * 1e3);
    if (r.output_tokens() > 1) {
      tpot.push_back((r.e2el_s() - r.ttft_s()) * 1e3 / static_cast<double>(r.output_tokens() - 1));
    }
    for (size_t i = 1; i < r.token_ns.size(); ++i) {
      itl.push_back((r.token_ns[i] - r.token_ns[i - 1]) * 1e-6);
    }
  }
  if (duration_s > 0) {
    m.request_throughput = static_cast<double>(m.completed) / duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / duration_s;
  }
  m.peak_concurrency = PeakConcurrency(records);
  m.ttft = Summarize(std::move(ttft));
  m.tpot = Summarize(std::move(tpot));
  m.itl = Summarize(std::move(itl));
  m.e2el = Summarize(std::move(e2el));
  return m;
}

}  // namespace pagellm::bench
