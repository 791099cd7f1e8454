// When each request of a serving benchmark is sent, as vLLM's benchmark_serving.py does it: the
// first at once, then gaps drawn from a gamma distribution with shape `burstiness` and mean
// 1 / request_rate. burstiness 1 is a Poisson process; below 1 requests come in bursts, above 1
// more evenly spaced. An infinite rate sends everything at once.
#ifndef PAGELLM_TOOLS_BENCH_ARRIVAL_SCHEDULE_H_
#define PAGELLM_TOOLS_BENCH_ARRIVAL_SCHEDULE_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"

namespace pagellm::bench {

struct ArrivalOptions {
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s, > 0
  double burstiness = 1.0;                                        // gamma shape, > 0
  uint64_t seed = 0;
};

// Arrival offsets in nanoseconds from the start of the run for `n` requests: non-decreasing,
// the first 0, all 0 for an infinite rate. InvalidArgument for a rate or burstiness that is not
// positive, or n < 0.
absl::StatusOr<std::vector<int64_t>> ArrivalOffsets(int64_t n, const ArrivalOptions& options);

}  // namespace pagellm::bench

#endif  // PAGELLM_TOOLS_BENCH_ARRIVAL_SCHEDULE_H_
