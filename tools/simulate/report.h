// Output of the simulator: a fixed-width table for people and a CSV for
// tools/simulate/plot_simulation.py (columns documented there and in WriteCsv's header row).
#ifndef PAGELLM_TOOLS_SIMULATE_REPORT_H_
#define PAGELLM_TOOLS_SIMULATE_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/simulate/sim_metrics.h"

namespace pagellm::sim {

// What the results were run on, repeated on every CSV row.
struct RunLabel {
  std::string model;
  std::string gpu;
  std::string trace;
};

// One row per result, in the given order; memory columns in percent of the pool.
std::string FormatTable(const std::vector<PolicyResult>& results);

// Writes a header row and one row per result. Internal when the file cannot be written.
absl::Status WriteCsv(const std::string& path, const RunLabel& label,
                      const std::vector<PolicyResult>& results);

}  // namespace pagellm::sim

#endif  // PAGELLM_TOOLS_SIMULATE_REPORT_H_
