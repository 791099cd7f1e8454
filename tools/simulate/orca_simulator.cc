// Request life: waiting (no slots) -> admitted with a reservation of R slots, prefills its input
// and samples output token 1 -> one decode per step, each sampling the next token -> finished
// after output_len samples, its extent freed at the end of that step. The last sampled token is
// never written to the cache, so a request uses at most final = input + output - 1 slots:
//   live = tokens written so far (this step's included), reserved = final - live,
//   internal = R - final.
// Invariant: sum of reservations == allocator.used(); running requests have prefilled.
#include "tools/simulate/orca_simulator.h"

#include <algorithm>
#include <bit>
#include <deque>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/simulate/contiguous_allocator.h"
#include "tools/simulate/cost_model.h"

namespace pagellm::sim {
namespace {

const char* PolicyName(Reservation r) {
  switch (r) {
    case Reservation::kMax:
      return "orca-max";
    case Reservation::kPow2:
      return "orca-pow2";
    case Reservation::kOracle:
      return "orca-oracle";
  }
  return "orca";
}

struct Running {
  size_t index = 0;       // into the trace
  int64_t start = 0;      // of the reservation
  int64_t size = 0;       // reserved slots
  int64_t computed = 0;   // tokens whose K/V are written; 0 until the prefill step
  int64_t generated = 0;  // output tokens sampled
};

}  // namespace

int64_t ReservationSize(Reservation policy, const TraceRequest& r, int64_t max_len) {
  const int64_t need = r.input_len + r.output_len;
  switch (policy) {
    case Reservation::kMax:
      return max_len;
    case Reservation::kPow2:
      return std::min<int64_t>(static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(need))),
                               std::max(max_len, need));
    case Reservation::kOracle:
      return need;
  }
  return need;
}

absl::StatusOr<PolicyResult> SimulateOrca(Reservation policy, const SimConfig& c,
                                          const std::vector<TraceRequest>& trace,
                                          double request_rate) {
  const int64_t capacity = c.pool_tokens();
  if (capacity <= 0) return absl::InvalidArgumentError("empty KV pool");
  for (const TraceRequest& r : trace) {
    if (ReservationSize(policy, r, c.model.max_len) > capacity) {
      return absl::InvalidArgumentError(
          absl::StrCat(PolicyName(policy), ": a request of ", r.input_len, " + ", r.output_len,
                       " tokens needs ", ReservationSize(policy, r, c.model.max_len),
                       " contiguous slots; the pool has ", capacity));
    }
  }
  ContiguousAllocator alloc(capacity);
  CostModel cost_model(c.model, c.gpu, c.cost);
  MetricsRecorder rec(PolicyName(policy), request_rate, static_cast<int64_t>(trace.size()),
                      capacity, trace.empty() ? 0 : trace.front().arrival_s,
                      trace.empty() ? 0 : trace.back().arrival_s);
  std::deque<size_t> waiting;
  std::vector<Running> running;
  size_t next = 0;
  int64_t completed = 0;
  double clock = trace.empty() ? 0 : trace.front().arrival_s;

  while (completed < static_cast<int64_t>(trace.size())) {
    for (; next < trace.size() && trace[next].arrival_s <= clock; ++next) waiting.push_back(next);
    int64_t budget = c.scheduler.max_num_batched_tokens - static_cast<int64_t>(running.size());
    while (!waiting.empty() && static_cast<int64_t>(running.size()) < c.scheduler.max_num_seqs) {
      const TraceRequest& r = trace[waiting.front()];
      if (r.input_len > budget && !running.empty()) break;
      absl::StatusOr<int64_t> start = alloc.Allocate(ReservationSize(policy, r, c.model.max_len));
      if (!start.ok()) break;
      running.push_back({waiting.front(), *start, ReservationSize(policy, r, c.model.max_len)});
      budget -= r.input_len;
      waiting.pop_front();
    }
    if (running.empty()) {
      // Nothing fits only when nothing is running: the pool is empty, so a request is waiting
      // only if none has arrived (every reservation fits an empty pool, checked above).
      if (next >= trace.size()) return absl::InternalError("orca: stalled with nothing to run");
      clock = trace[next].arrival_s;
      continue;
    }

    StepCost cost;
    MemorySplit split;
    for (const Running& q : running) {
      const TraceRequest& r = trace[q.index];
      const int64_t tokens = q.computed == 0 ? r.input_len : 1;
      cost_model.AddSequence(&cost, tokens, q.computed, /*sample=*/true);
      const int64_t final_len = r.input_len + r.output_len - 1;
      split.live += static_cast<double>(q.computed + tokens);
      split.reserved += static_cast<double>(final_len - q.computed - tokens);
      split.internal += static_cast<double>(q.size - final_len);
    }
    split.external = static_cast<double>(alloc.ExternalFragmentation());
    split.free = static_cast<double>(alloc.LargestFreeExtent());
    const double dt = cost_model.Seconds(cost);
    rec.RecordStep(clock, dt, static_cast<int64_t>(running.size()), split);
    clock += dt;

    size_t kept = 0;
    for (Running& q : running) {
      const TraceRequest& r = trace[q.index];
      q.computed += q.computed == 0 ? r.input_len : 1;
      if (++q.generated < r.output_len) {
        running[kept++] = q;
        continue;
      }
      if (absl::Status s = alloc.Free(q.start); !s.ok()) return s;
      rec.RecordFinish(r.arrival_s, clock, r.output_len);
      ++completed;
    }
    running.resize(kept);
  }
  if (alloc.used() != 0) {
    return absl::InternalError(absl::StrCat(PolicyName(policy), ": ", alloc.used(),
                                            " slots still reserved after every request ended"));
  }
  return rec.Result();
}

}  // namespace pagellm::sim
