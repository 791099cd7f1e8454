#include "tools/bench/arrival_schedule.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace pagellm::bench {
namespace {
constexpr uint64_t kArrivalStream = 0x9e3779b97f4a7c15ull;  // apart from the dataset's streams
}  // namespace

absl::StatusOr<std::vector<int64_t>> ArrivalOffsets(int64_t n, const ArrivalOptions& o) {
  if (n < 0 || !(o.request_rate > 0) || !(o.burstiness > 0) || std::isinf(o.burstiness)) {
    return absl::InvalidArgumentError(absl::StrCat("bad arrival options: ", n, " requests, rate ",
                                                   o.request_rate, ", burstiness ", o.burstiness));
  }
  std::vector<int64_t> offsets(n, 0);
  if (std::isinf(o.request_rate)) return offsets;
  // Mean gap = shape * scale = 1 / rate.
  std::gamma_distribution<double> gap_s(o.burstiness, 1.0 / (o.request_rate * o.burstiness));
  std::mt19937_64 rng(o.seed ^ kArrivalStream);
  double t_s = 0;
  for (int64_t i = 1; i < n; ++i) {
    t_s += gap_s(rng);
    offsets[i] = std::llround(t_s * 1e9);
  }
  return offsets;
}

}  // namespace pagellm::bench
