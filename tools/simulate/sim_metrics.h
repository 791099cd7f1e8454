// What a simulated serving run reports, and the recorder that every engine model feeds once per
// step and once per finished request, so all policies are measured the same way.
//
// KV memory is split into token slots (the categories of the vLLM paper's Fig. 2), which must add
// up to the pool on every step:
//   live      slots holding K/V of a token, or being written this step
//   reserved  slots held for tokens that will be computed (remaining output, later prefill chunks)
//   internal  slots held but never to be used: reservation beyond the final length, the unfilled
//             tail of a paged block
//   external  free slots outside the largest free extent (contiguous allocation only)
//   free      the rest: the largest free extent, or the paged pool's free blocks
// Fractions are time-averaged (weighted by step duration) over steps that compute something.
//
// Batch size and memory are averaged over the steady state: the steps that start before the last
// request arrives (all steps if every request arrives at once). The drain after it is left out:
// with a finite trace it is a few long requests running nearly alone (a 1000-token output outlives
// a 7 s Alpaca trace at 150 req/s by 20 s), which says nothing about the policy at that rate.
// Throughput and latency cover the whole run. Not thread-safe.
#ifndef PAGELLM_TOOLS_SIMULATE_SIM_METRICS_H_
#define PAGELLM_TOOLS_SIMULATE_SIM_METRICS_H_

#include <cstdint>
#include <string>

namespace pagellm::sim {

struct MemorySplit {
  double live = 0;
  double reserved = 0;
  double internal = 0;
  double external = 0;
  double free = 0;
  [[nodiscard]] double total() const { return live + reserved + internal + external + free; }
};

struct PolicyResult {
  std::string policy;
  double request_rate = 0;  // offered load, requests/s
  int64_t num_requests = 0;
  int64_t completed = 0;
  int64_t steps = 0;               // steps that computed something (whole run)
  int64_t steady_steps = 0;        // ... of which the averages below cover
  int64_t pool_tokens = 0;         // KV slots in the device pool
  double mean_batched = 0;         // requests per step, averaged over steady-state steps
  MemorySplit memory;              // fractions of the pool, time-averaged
  double live_share_of_used = 0;   // live / (pool - free): the paper's Fig. 2 "token states"
  double makespan_s = 0;           // first arrival to last completion
  double throughput_rps = 0;       // completed / makespan
  double output_tps = 0;           // output tokens / makespan
  double mean_latency_s = 0;       // end-to-end, arrival to last token
  double mean_norm_latency_s = 0;  // mean of latency / output_len, s/token
  int64_t preemptions = 0;
  int64_t swapped_blocks = 0;  // blocks swapped out and in
};

class MetricsRecorder {
 public:
  // The trace's first and last arrival bound the makespan and the steady state.
  MetricsRecorder(std::string policy, double request_rate, int64_t num_requests,
                  int64_t pool_tokens, double first_arrival_s, double last_arrival_s);

  // One step that started at `start_s` and ran for `seconds` with `batched` requests computing,
  // and the pool split in token slots during it. REQUIRES: slots.total() == pool_tokens (checked
  // to 1e-6 relative; a mismatch is an accounting bug in the engine model and aborts).
  void RecordStep(double start_s, double seconds, int64_t batched, const MemorySplit& slots);
  // One finished request.
  void RecordFinish(double arrival_s, double finish_s, int64_t output_len);

  [[nodiscard]] PolicyResult Result() const;
  // Preemption counters, copied into the result.
  void SetPreemptions(int64_t preemptions, int64_t swapped_blocks);

 private:
  struct Averages {
    int64_t steps = 0;
    double busy_s = 0;
    double batched_sum = 0;
    MemorySplit weighted;  // slot-seconds
  };
  static void Add(Averages* a, double seconds, int64_t batched, const MemorySplit& s);

  PolicyResult r_;
  double first_arrival_s_;
  double last_arrival_s_;
  Averages all_;
  Averages steady_;
  double last_finish_s_ = 0;
  double output_tokens_ = 0;
  double latency_sum_ = 0;
  double norm_latency_sum_ = 0;
};

}  // namespace pagellm::sim

#endif  // PAGELLM_TOOLS_SIMULATE_SIM_METRICS_H_
