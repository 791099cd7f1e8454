#include "tools/bench/bench_stream.h"

#include <utility>

namespace pagellm::bench {

BenchStream::BenchStream(WireRequest request, int32_t prompt_len, int32_t expected_output_len,
                         std::function<void()> on_done)
    : request_(std::move(request)), on_done_(std::move(on_done)) {
  record_.prompt_len = prompt_len;
  record_.expected_output_len = expected_output_len;
  record_.token_ns.reserve(expected_output_len);
}

int64_t BenchStream::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - origin_).count();
}

void BenchStream::Start(BenchTarget* target, absl::Duration timeout, Clock::time_point origin) {
  origin_ = origin;
  if (timeout != absl::InfiniteDuration()) {
    context_.set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
  }
  target->StartGenerate(&context_, request_, this);
  StartRead(&response_);
  record_.send_ns = NowNs();
  StartCall();
}

void BenchStream::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended; OnDone follows with the status
  const int64_t now = NowNs();
  for (const v1::SampleDelta& d : response_.deltas()) {
    // Benchmarks ask for one sample; count only sample 0 should a server send more.
    if (d.sample_index() != 0 || d.token_ids_size() == 0) continue;
    record_.token_ns.insert(record_.token_ns.end(), d.token_ids_size(), now);
  }
  StartRead(&response_);
}

void BenchStream::OnDone(const grpc::Status& status) {
  record_.end_ns = NowNs();
  record_.code = static_cast<absl::StatusCode>(status.error_code());
  record_.error = status.error_message();
  if (status.ok() && record_.token_ns.empty()) {
    record_.code = absl::StatusCode::kUnknown;
    record_.error = "the stream ended OK without a single token";
  }
  // Last: the owner may destroy this stream once signalled.
  std::function<void()> on_done = std::move(on_done_);
  on_done();
}

}  // namespace pagellm::bench
