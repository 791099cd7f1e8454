// BenchStream: one benchmark request's Generate call, a gRPC callback reactor that records when
// the call was sent, when each token arrived and how it ended (a RequestRecord). One reactor
// per call, so hundreds of concurrent streams need no thread each.
//
// Per message the reactor takes one clock reading and appends one timestamp per token to a
// vector reserved for the expected output length: no allocation beyond protobuf's own (the
// response message is reused across reads).
#ifndef PAGELLM_TOOLS_BENCH_BENCH_STREAM_H_
#define PAGELLM_TOOLS_BENCH_BENCH_STREAM_H_

#include <chrono>
#include <functional>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/generation.pb.h"
#include "tools/bench/bench_target.h"
#include "tools/bench/request_record.h"

namespace pagellm::bench {

// Not thread-safe to share: Start is called once by the dispatcher; gRPC then runs the
// reactions one at a time. record() is valid once `on_done` has run.
class BenchStream final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  using Clock = std::chrono::steady_clock;

  // `request` is sent as is. `on_done` runs on a gRPC thread
  // as the stream's last action: the stream may be destroyed as soon as it returns (or, by
  // another thread, as soon as it has signalled whoever owns the stream).
  BenchStream(WireRequest request, int32_t prompt_len, int32_t expected_output_len,
              std::function<void()> on_done);
  BenchStream(const BenchStream&) = delete;
  BenchStream& operator=(const BenchStream&) = delete;

  // Records the send time and starts the call, with `timeout` as its deadline (infinite: none).
  // The record's times count from `origin`. REQUIRES: called once; `target` outlives the call.
  void Start(BenchTarget* target, absl::Duration timeout, Clock::time_point origin);

  [[nodiscard]] const RequestRecord& record() const { return record_; }

 private:
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;
  [[nodiscard]] int64_t NowNs() const;

  const WireRequest request_;  // must outlive the call
  Clock::time_point origin_;   // set by Start
  std::function<void()> on_done_;
  grpc::ClientContext context_;
  v1::GenerateResponse response_;  // reused by every read
  RequestRecord record_;
};

}  // namespace pagellm::bench

#endif  // PAGELLM_TOOLS_BENCH_BENCH_STREAM_H_
