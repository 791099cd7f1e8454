#include "tools/simulate/sim_metrics.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/logging.h"

namespace pagellm::sim {

MetricsRecorder::MetricsRecorder(std::string policy, double request_rate, int64_t num_requests,
                                 int64_t pool_tokens, double first_arrival_s, double last_arrival_s)
    : first_arrival_s_(first_arrival_s), last_arrival_s_(last_arrival_s) {
  r_.policy = std::move(policy);
  r_.request_rate = request_rate;
  r_.num_requests = num_requests;
  r_.pool_tokens = pool_tokens;
}

void MetricsRecorder::Add(Averages* a, double seconds, int64_t batched, const MemorySplit& s) {
  ++a->steps;
  a->busy_s += seconds;
  a->batched_sum += static_cast<double>(batched);
  a->weighted.live += s.live * seconds;
  a->weighted.reserved += s.reserved * seconds;
  a->weighted.internal += s.internal * seconds;
  a->weighted.external += s.external * seconds;
  a->weighted.free += s.free * seconds;
}

void MetricsRecorder::RecordStep(double start_s, double seconds, int64_t batched,
                                 const MemorySplit& s) {
  const double pool = static_cast<double>(r_.pool_tokens);
  PAGELLM_CHECK(std::abs(s.total() - pool) <= 1e-6 * pool,
                "{}: memory split {} + {} + {} + {} + {} does not add up to the pool of {} "
                "(accounting bug in the engine model)",
                r_.policy, s.live, s.reserved, s.internal, s.external, s.free, pool);
  Add(&all_, seconds, batched, s);
  if (start_s < last_arrival_s_) Add(&steady_, seconds, batched, s);
}

void MetricsRecorder::RecordFinish(double arrival_s, double finish_s, int64_t output_len) {
  ++r_.completed;
  last_finish_s_ = std::max(last_finish_s_, finish_s);
  output_tokens_ += static_cast<double>(output_len);
  latency_sum_ += finish_s - arrival_s;
  norm_latency_sum_ += (finish_s - arrival_s) / static_cast<double>(output_len);
}

void MetricsRecorder::SetPreemptions(int64_t preemptions, int64_t swapped_blocks) {
  r_.preemptions = preemptions;
  r_.swapped_blocks = swapped_blocks;
}

PolicyResult MetricsRecorder::Result() const {
  PolicyResult r = r_;
  r.steps = all_.steps;
  const Averages& a = steady_.steps > 0 ? steady_ : all_;
  r.steady_steps = a.steps;
  if (a.steps > 0) r.mean_batched = a.batched_sum / static_cast<double>(a.steps);
  if (a.busy_s > 0) {
    const double norm = 1.0 / (a.busy_s * static_cast<double>(r.pool_tokens));
    r.memory = {a.weighted.live * norm, a.weighted.reserved * norm, a.weighted.internal * norm,
                a.weighted.external * norm, a.weighted.free * norm};
    const double used = 1.0 - r.memory.free;
    r.live_share_of_used = used > 0 ? r.memory.live / used : 0;
  }
  if (r.completed > 0) {
    r.makespan_s = last_finish_s_ - first_arrival_s_;
    if (r.makespan_s > 0) {
      r.throughput_rps = static_cast<double>(r.completed) / r.makespan_s;
      r.output_tps = output_tokens_ / r.makespan_s;
    }
    r.mean_latency_s = latency_sum_ / static_cast<double>(r.completed);
    r.mean_norm_latency_s = norm_latency_sum_ / static_cast<double>(r.completed);
  }
  return r;
}

}  // namespace pagellm::sim
