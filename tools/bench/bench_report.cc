#include "tools/bench/bench_report.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pagellm::bench {
namespace {

constexpr int kWidth = 50;

// A centred "---title---" line of kWidth characters.
std::string Banner(const std::string& title, char fill) {
  const int pad = std::max<int>(0, kWidth - static_cast<int>(title.size()));
  return std::string(pad / 2, fill) + title + std::string(pad - pad / 2, fill) + "\n";
}

std::string Line(const std::string& label, const std::string& value) {
  return absl::StrFormat("%-40s %s\n", label, value);
}
std::string Line(const std::string& label, double value) {
  return Line(label, absl::StrFormat("%.2f", value));
}

struct NamedStats {
  const char* key;    // "ttft" -> mean_ttft_ms
  const char* name;   // "TTFT"
  const char* title;  // section banner
  const LatencyStats* stats;
};

std::vector<NamedStats> Sections(const BenchMetrics& m) {
  return {{"ttft", "TTFT", "Time to First Token", &m.ttft},
          {"tpot", "TPOT", "Time per Output Token (excl. 1st token)", &m.tpot},
          {"itl", "ITL", "Inter-token Latency", &m.itl},
          {"e2el", "E2EL", "End-to-end Latency", &m.e2el}};
}

std::string RateText(double rate) { return std::isinf(rate) ? "inf" : absl::StrCat(rate); }

}  // namespace

std::string FormatReport(const RunInfo& info, const BenchMetrics& m) {
  std::string out = Banner(" Serving Benchmark Result ", '=');
  out += Line("Server:", absl::StrCat(info.server, " (", info.endpoint, ")"));
  if (!info.model.empty()) out += Line("Model:", info.model);
  out += Line("Dataset:", absl::StrCat(info.dataset, ", ", info.num_prompts, " prompts"));
  out += Line("Traffic request rate:", RateText(info.request_rate));
  out += Line("Burstiness factor:",
              absl::StrCat(info.burstiness, info.burstiness == 1.0 ? " (Poisson process)" : ""));
  out += Line("Maximum request concurrency:",
              info.max_concurrency > 0 ? absl::StrCat(info.max_concurrency) : "None");
  out += Line("Successful requests:", absl::StrCat(m.completed));
  out += Line("Failed requests:", absl::StrCat(m.failed));
  out += Line("Benchmark duration (s):", m.duration_s);
  out += Line("Total input tokens:", absl::StrCat(m.total_input_tokens));
  out += Line("Total generated tokens:", absl::StrCat(m.total_output_tokens));
  out += Line("Request throughput (req/s):", m.request_throughput);
  out += Line("Output token throughput (tok/s):", m.output_throughput);
  out += Line("Total Token throughput (tok/s):", m.total_token_throughput);
  out += Line("Peak concurrent requests:", absl::StrCat(m.peak_concurrency));
  for (const NamedStats& s : Sections(m)) {
    out += Banner(s.title, '-');
    out += Line(absl::StrCat("Mean ", s.name, " (ms):"), s.stats->mean_ms);
    out += Line(absl::StrCat("Median ", s.name, " (ms):"), s.stats->median_ms);
    out += Line(absl::StrCat("P90 ", s.name, " (ms):"), s.stats->p90_ms);
    out += Line(absl::StrCat("P95 ", s.name, " (ms):"), s.stats->p95_ms);
    out += Line(absl::StrCat("P99 ", s.name, " (ms):"), s.stats->p99_ms);
  }
  if (!m.errors_by_code.empty()) {
    out += Banner("Errors", '-');
    for (const auto& [code, count] : m.errors_by_code) {
      out += Line(absl::StrCat(code, ":"), absl::StrCat(count));
      out += absl::StrCat("  e.g. ", m.error_examples.at(code), "\n");
    }
  }
  out += std::string(kWidth, '=') + "\n";
  return out;
}

nlohmann::json ReportJson(const RunInfo& info, const BenchMetrics& m,
                          std::span<const RequestRecord> detailed) {
  nlohmann::json j;
  j["server"] = info.server;
  j["endpoint"] = info.endpoint;
  j["model_id"] = info.model;
  j["dataset"] = info.dataset;
  j["num_prompts"] = info.num_prompts;
  if (std::isinf(info.request_rate)) {
    j["request_rate"] = "inf";  // as vLLM writes it
  } else {
    j["request_rate"] = info.request_rate;
  }
  j["burstiness"] = info.burstiness;
  j["max_concurrency"] =
      info.max_concurrency > 0 ? nlohmann::json(info.max_concurrency) : nlohmann::json(nullptr);
  j["seed"] = info.seed;
  j["duration"] = m.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input_tokens;
  j["total_output_tokens"] = m.total_output_tokens;
  j["request_throughput"] = m.request_throughput;
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["peak_concurrency"] = m.peak_concurrency;
  for (const NamedStats& s : Sections(m)) {
    const std::string k = s.key;
    j["mean_" + k + "_ms"] = s.stats->mean_ms;
    j["median_" + k + "_ms"] = s.stats->median_ms;
    j["std_" + k + "_ms"] = s.stats->std_ms;
    j["p90_" + k + "_ms"] = s.stats->p90_ms;
    j["p95_" + k + "_ms"] = s.stats->p95_ms;
    j["p99_" + k + "_ms"] = s.stats->p99_ms;
  }
  j["errors_by_code"] = m.errors_by_code;
  if (!detailed.empty()) {
    nlohmann::json input_lens = nlohmann::json::array(), output_lens = nlohmann::json::array(),
                   ttfts = nlohmann::json::array(), itls = nlohmann::json::array(),
                   errors = nlohmann::json::array();
    for (const RequestRecord& r : detailed) {
      input_lens.push_back(r.prompt_len);
      output_lens.push_back(r.success() ? r.output_tokens() : 0);
      ttfts.push_back(r.success() ? r.ttft_s() : 0.0);
      nlohmann::json itl = nlohmann::json::array();
      for (size_t i = 1; r.success() && i < r.token_ns.size(); ++i) {
        itl.push_back((r.token_ns[i] - r.token_ns[i - 1]) * 1e-9);
      }
      itls.push_back(std::move(itl));
      errors.push_back(r.success() ? std::string() : StatusCodeName(r.code) + ": " + r.error);
    }
    j["input_lens"] = std::move(input_lens);
    j["output_lens"] = std::move(output_lens);
    j["ttfts"] = std::move(ttfts);
    j["itls"] = std::move(itls);
    j["errors"] = std::move(errors);
  }
  return j;
}

}  // namespace pagellm::bench
