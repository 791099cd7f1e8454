// One dispatcher thread (the caller's) walks the arrival schedule and starts calls; gRPC's
// callback threads run the streams and report each end through InFlight. The dispatcher is the
// only thread that starts calls, so requests start in order and max_concurrency is never
// exceeded: a slot is taken (under the mutex) before its call starts and given back only after
// that call's status has arrived.
#include "tools/bench/serving_bench.h"

#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/api/proto_convert.h"
#include "common/sampling/sampling_params.h"
#include "tools/bench/arrival_schedule.h"
#include "tools/bench/bench_stream.h"

namespace pagellm::bench {
namespace {

using Clock = BenchStream::Clock;

// Calls in flight and calls done. Shared with the streams' completion callbacks, which may
// still be unlocking it while the dispatcher returns: hence shared ownership.
class InFlight {
 public:
  InFlight(int32_t limit, int64_t total) : limit_(limit), total_(total) {}

  // Blocks until fewer than `limit` calls run (never with no limit), then counts one more.
  void Acquire() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &InFlight::HasSlot));
    ++running_;
  }
  // A call has ended.
  void Release() {
    absl::MutexLock lock(&mu_);
    --running_;
    ++done_;
  }
  // Blocks until `total` calls have ended.
  void AwaitAllDone() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &InFlight::AllDone));
  }

 private:
  bool HasSlot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return limit_ <= 0 || running_ < limit_;
  }
  bool AllDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ >= total_; }

  const int32_t limit_;  // 0: unlimited
  const int64_t total_;
  absl::Mutex mu_;
  int32_t running_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;
};

v1::SamplingParams Sampling(const BenchRequest& r, const ServingBenchOptions& o) {
  SamplingParams s;
  s.temperature = o.temperature;
  s.max_tokens = r.output_len;
  s.ignore_eos = true;
  v1::SamplingParams p;
  SamplingParamsToProto(s, &p);
  return p;
}

// Sends requests[i] at start + offsets[i] (or when a slot frees), waits for all, returns the
// records and the duration.
std::pair<std::vector<RequestRecord>, double> Dispatch(BenchTarget* target,
                                                       const std::vector<BenchRequest>& requests,
                                                       const std::vector<int64_t>& offsets,
                                                       const std::string& id_prefix,
                                                       const ServingBenchOptions& o) {
  auto in_flight =
      std::make_shared<InFlight>(o.max_concurrency, static_cast<int64_t>(requests.size()));
  // Everything is built before the clock starts: sending costs only the call itself.
  std::vector<std::unique_ptr<BenchStream>> streams;
  streams.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const BenchRequest& r = requests[i];
    streams.push_back(std::make_unique<BenchStream>(
        target->MakeRequest(absl::StrCat(id_prefix, i), r.prompt_token_ids, Sampling(r, o)),
        static_cast<int32_t>(r.prompt_token_ids.size()), r.output_len,
        [in_flight] { in_flight->Release(); }));
  }
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < streams.size(); ++i) {
    const Clock::time_point arrival = start + std::chrono::nanoseconds(offsets[i]);
    if (Clock::now() < arrival) std::this_thread::sleep_until(arrival);  // the arrival process
    in_flight->Acquire();
    streams[i]->Start(target, o.request_timeout, start);
  }
  in_flight->AwaitAllDone();
  const double duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<RequestRecord> records;
  records.reserve(streams.size());
  for (auto& s : streams) records.push_back(s->record());
  return {std::move(records), duration_s};
}

}  // namespace

absl::StatusOr<ServingBenchResult> RunServingBench(BenchTarget* target,
                                                   const std::vector<BenchRequest>& requests,
                                                   const ServingBenchOptions& o) {
  if (requests.empty()) return absl::InvalidArgumentError("no requests to send");
  if (o.max_concurrency < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-concurrency must be >= 0, not ", o.max_concurrency));
  }
  ArrivalOptions ao;
  ao.request_rate = o.request_rate;
  ao.burstiness = o.burstiness;
  ao.seed = o.seed;
  absl::StatusOr<std::vector<int64_t>> offsets =
      ArrivalOffsets(static_cast<int64_t>(requests.size()), ao);
  if (!offsets.ok()) return offsets.status();

  if (o.initial_test_run) {
    auto [test, unused] = Dispatch(target, {requests.front()}, {0}, "bench-test-", o);
    if (!test.front().success()) {
      return absl::Status(test.front().code,
                          absl::StrCat("initial test run: ", test.front().error));
    }
  }
  ServingBenchResult result;
  std::tie(result.records, result.duration_s) = Dispatch(target, requests, *offsets, "bench-", o);
  result.metrics = ComputeMetrics(result.records, result.duration_s);
  return result;
}

}  // namespace pagellm::bench
