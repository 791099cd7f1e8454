// The Orca baselines of the vLLM paper (§6.2): iteration-level batching, FCFS, but each request's
// KV cache is one contiguous reservation made at admission (ContiguousAllocator, first fit) and
// held until the request finishes. The reservation covers the request's output, so nothing is
// ever preempted. Sizes:
//   kMax     the model's maximum length (Orca-Max)
//   kPow2    the next power of two of input + output, at most the maximum length (Orca-Pow2)
//   kOracle  exactly input + output (Orca-Oracle: knows the output length in advance)
//
// Each step decodes one token for every running request and admits waiting requests in arrival
// order (stopping at the first that does not fit: no overtaking) while the token budget
// (max_num_batched_tokens), the sequence cap (max_num_seqs) and a free extent allow. An admitted
// request prefills its whole prompt in that step (no chunking); a prompt larger than the budget
// is admitted only into an otherwise empty batch. Same CostModel as the paged policy.
#ifndef PAGELLM_TOOLS_SIMULATE_ORCA_SIMULATOR_H_
#define PAGELLM_TOOLS_SIMULATE_ORCA_SIMULATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/simulate/sim_config.h"
#include "tools/simulate/sim_metrics.h"
#include "tools/simulate/trace.h"

namespace pagellm::sim {

enum class Reservation { kMax, kPow2, kOracle };

// Slots reserved for a request under `policy`.
int64_t ReservationSize(Reservation policy, const TraceRequest& request, int64_t max_len);

// Replays `trace` (sorted by arrival) until every request finishes; `request_rate` labels the
// result. InvalidArgument when a request's reservation exceeds the whole pool.
absl::StatusOr<PolicyResult> SimulateOrca(Reservation policy, const SimConfig& config,
                                          const std::vector<TraceRequest>& trace,
                                          double request_rate);

}  // namespace pagellm::sim

#endif  // PAGELLM_TOOLS_SIMULATE_ORCA_SIMULATOR_H_
