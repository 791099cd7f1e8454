#include "tools/simulate/trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pagellm::sim {
namespace {

constexpr uint64_t kArrivalStream = 0x9e3779b97f4a7c15ull;  // second stream from the same seed
constexpr int kCalibrationSamples = 4096;

double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// mu such that the clipped mean averaged over `his` (one upper clip per sample) equals `mean`.
double SolveMu(double mean, double sigma, const std::vector<double>& his) {
  double lo = -20, hi = 20;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    double m = 0;
    for (double h : his) m += ClippedLognormalMean(mid, sigma, 1.0, h);
    m /= static_cast<double>(his.size());
    (m < mean ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

int64_t Clip(double x, int64_t lo, int64_t hi) {
  return std::clamp<int64_t>(std::llround(std::min(x, 1e15)), lo, hi);
}

void PoissonArrivals(std::vector<TraceRequest>* trace, double rate, uint64_t seed) {
  std::mt19937_64 rng(seed ^ kArrivalStream);
  std::exponential_distribution<double> gap(1.0);
  double t = 0;
  for (TraceRequest& r : *trace) {
    r.arrival_s = std::isinf(rate) ? 0.0 : t / rate;
    t += gap(rng);
  }
}

absl::Status CheckOptions(const TraceOptions& o) {
  if (!(o.request_rate > 0) || o.num_requests < 0 || o.max_len < 2) {
    return absl::InvalidArgumentError(absl::StrCat("bad trace options: request_rate ",
                                                   o.request_rate, ", num_requests ",
                                                   o.num_requests, ", max_len ", o.max_len));
  }
  return absl::OkStatus();
}

}  // namespace

double ClippedLognormalMean(double mu, double sigma, double lo, double hi) {
  // E[clip(X, lo, hi)] = lo P(X < lo) + E[X; lo <= X <= hi] + hi P(X > hi), with
  // E[X; X <= c] = exp(mu + sigma^2 / 2) Phi((ln c - mu - sigma^2) / sigma).
  const double a = std::log(lo), b = std::log(hi);
  const double partial =
      std::exp(mu + sigma * sigma / 2) *
      (NormalCdf((b - mu - sigma * sigma) / sigma) - NormalCdf((a - mu - sigma * sigma) / sigma));
  return lo * NormalCdf((a - mu) / sigma) + partial + hi * (1 - NormalCdf((b - mu) / sigma));
}

absl::StatusOr<SyntheticWorkload> LookupWorkload(const std::string& name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "sharegpt") return SyntheticWorkload{"sharegpt", {161.31, 1.0}, {337.99, 1.0}};
  if (n == "alpaca") return SyntheticWorkload{"alpaca", {19.31, 0.6}, {58.45, 1.0}};
  return absl::NotFoundError(
      absl::StrCat("unknown workload '", name, "': sharegpt, alpaca or a .jsonl file"));
}

absl::StatusOr<std::vector<TraceRequest>> GenerateTrace(const SyntheticWorkload& w,
                                                        const TraceOptions& o) {
  if (absl::Status s = CheckOptions(o); !s.ok()) return s;
  const int64_t max_len = o.max_len;
  // Inputs are clipped to [1, max_len - 1]; outputs to [1, max_len - input], so the output's mu
  // is solved over a fixed sample of inputs.
  const double mu_in = SolveMu(w.input.mean, w.input.sigma, {static_cast<double>(max_len - 1)});
  std::mt19937_64 calib(1);
  std::lognormal_distribution<double> calib_in(mu_in, w.input.sigma);
  std::vector<double> out_caps(kCalibrationSamples);
  for (double& c : out_caps)
    c = static_cast<double>(max_len - Clip(calib_in(calib), 1, max_len - 1));
  const double mu_out = SolveMu(w.output.mean, w.output.sigma, out_caps);

  std::vector<TraceRequest> trace(o.num_requests);
  std::mt19937_64 rng(o.seed);
  std::lognormal_distribution<double> in_dist(mu_in, w.input.sigma);
  std::lognormal_distribution<double> out_dist(mu_out, w.output.sigma);
  for (TraceRequest& r : trace) {
    r.input_len = Clip(in_dist(rng), 1, max_len - 1);
    r.output_len = Clip(out_dist(rng), 1, max_len - r.input_len);
  }
  PoissonArrivals(&trace, o.request_rate, o.seed);
  return trace;
}

absl::StatusOr<std::vector<TraceRequest>> LoadTraceJsonl(const std::string& path,
                                                         const TraceOptions& o,
                                                         bool* arrivals_given) {
  if (absl::Status s = CheckOptions(o); !s.ok()) return s;
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open trace ", path));
  std::vector<TraceRequest> trace;
  int64_t with_arrival = 0;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (o.num_requests > 0 && static_cast<int64_t>(trace.size()) == o.num_requests) break;
    const auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", why));
    };
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return bad("not a JSON object");
    TraceRequest r;
    for (auto [key, field] :
         {std::pair{"input_len", &r.input_len}, std::pair{"output_len", &r.output_len}}) {
      auto it = j.find(key);
      if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 1) {
        return bad(absl::StrCat("\"", key, "\" must be an integer >= 1"));
      }
      *field = it->get<int64_t>();
    }
    if (r.input_len + r.output_len > o.max_len) {
      return bad(absl::StrCat("input_len + output_len = ", r.input_len + r.output_len,
                              " exceeds the model's max length ", o.max_len));
    }
    if (auto it = j.find("arrival_s"); it != j.end()) {
      if (!it->is_number() || !(it->get<double>() >= 0)) return bad("bad \"arrival_s\"");
      r.arrival_s = it->get<double>();
      ++with_arrival;
    }
    trace.push_back(r);
  }
  if (with_arrival == 0) {
    PoissonArrivals(&trace, o.request_rate, o.seed);
  } else if (with_arrival != static_cast<int64_t>(trace.size())) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": \"arrival_s\" on ", with_arrival,
                                                   " of ", trace.size(),
                                                   " lines; give it on every line or on none"));
  }
  if (arrivals_given != nullptr) *arrivals_given = with_arrival > 0;
  std::stable_sort(trace.begin(), trace.end(), [](const TraceRequest& a, const TraceRequest& b) {
    return a.arrival_s < b.arrival_s;
  });
  return trace;
}

}  // namespace pagellm::sim
