// The "pagellm" policy of the simulator: the engine's own Scheduler and BlockManager, driven by
// a trace on a simulated clock with the CostModel in place of the model.
#ifndef PAGELLM_TOOLS_SIMULATE_PAGED_SIMULATOR_H_
#define PAGELLM_TOOLS_SIMULATE_PAGED_SIMULATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "tools/simulate/sim_config.h"
#include "tools/simulate/sim_metrics.h"
#include "tools/simulate/trace.h"

namespace pagellm::sim {

// Replays `trace` (sorted by arrival) until every request finishes; `request_rate` only labels
// the result. Errors: the BlockManager's for bad pool options; Internal when no progress is
// possible (a request larger than the pool) or when the scheduler's bookkeeping breaks an
// invariant the driver checks (blocks left allocated at the end, a negative memory category).
absl::StatusOr<PolicyResult> SimulatePaged(const SimConfig& config,
                                           const std::vector<TraceRequest>& trace,
                                           double request_rate);

}  // namespace pagellm::sim

#endif  // PAGELLM_TOOLS_SIMULATE_PAGED_SIMULATOR_H_
