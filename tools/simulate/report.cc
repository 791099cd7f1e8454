#include "tools/simulate/report.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pagellm::sim {

std::string FormatTable(const std::vector<PolicyResult>& results) {
  std::string out =
      absl::StrFormat("%-12s %7s %6s %8s %6s %6s %6s %6s %6s %7s %8s %9s %10s %8s\n", "policy",
                      "rate/s", "done", "batched", "live%", "resv%", "int%", "ext%", "free%",
                      "live/use", "req/s", "out_tok/s", "norm_lat", "preempt");
  for (const PolicyResult& r : results) {
    const MemorySplit& m = r.memory;
    absl::StrAppendFormat(
        &out,
        "%-12s %7.2f %6d %8.2f %6.1f %6.1f %6.1f %6.1f %6.1f %7.1f%% %8.3f %9.1f %10.4f %8d\n",
        r.policy, r.request_rate, r.completed, r.mean_batched, 100 * m.live, 100 * m.reserved,
        100 * m.internal, 100 * m.external, 100 * m.free, 100 * r.live_share_of_used,
        r.throughput_rps, r.output_tps, r.mean_norm_latency_s, r.preemptions);
  }
  return out;
}

absl::Status WriteCsv(const std::string& path, const RunLabel& label,
                      const std::vector<PolicyResult>& results) {
  std::ofstream f(path);
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  f << "model,gpu,trace,policy,request_rate,num_requests,completed,steps,steady_steps,pool_tokens,"
       "mean_batched,live_frac,reserved_frac,internal_frac,external_frac,free_frac,"
       "live_share_of_used,makespan_s,throughput_rps,output_tps,mean_latency_s,"
       "mean_norm_latency_s,preemptions,swapped_blocks\n";
  for (const PolicyResult& r : results) {
    const MemorySplit& m = r.memory;
    f << absl::StrFormat(
        "%s,%s,%s,%s,%.6g,%d,%d,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,"
        "%.6g,%d,%d\n",
        label.model, label.gpu, label.trace, r.policy, r.request_rate, r.num_requests, r.completed,
        r.steps, r.steady_steps, r.pool_tokens, r.mean_batched, m.live, m.reserved, m.internal,
        m.external, m.free, r.live_share_of_used, r.makespan_s, r.throughput_rps, r.output_tps,
        r.mean_latency_s, r.mean_norm_latency_s, r.preemptions, r.swapped_blocks);
  }
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

}  // namespace pagellm::sim
