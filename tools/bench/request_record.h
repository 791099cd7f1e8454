// RequestRecord: what one benchmark request did and when, the raw data the metrics come from.
#ifndef PAGELLM_TOOLS_BENCH_REQUEST_RECORD_H_
#define PAGELLM_TOOLS_BENCH_REQUEST_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pagellm::bench {

// Times are nanoseconds since the start of the run (steady clock). A plain value type, written
// by one stream's callbacks and read once the stream is done.
struct RequestRecord {
  int32_t prompt_len = 0;
  int32_t expected_output_len = 0;  // the max_tokens asked for
  int64_t send_ns = -1;             // the call was started; -1 before
  int64_t end_ns = -1;              // the final status arrived; -1 before
  // Arrival time of each output token, in order. A message carrying k tokens adds k equal
  // entries: its tokens arrive together. The size is the output token count.
  std::vector<int64_t> token_ns;
  // The call's gRPC status (absl and gRPC share codes). A call that ends OK without a single
  // token counts as failed, with code kUnknown and a message saying so.
  absl::StatusCode code = absl::StatusCode::kUnknown;
  std::string error;  // the status message; empty on success

  [[nodiscard]] bool success() const { return code == absl::StatusCode::kOk; }
  [[nodiscard]] int64_t output_tokens() const { return static_cast<int64_t>(token_ns.size()); }
  // Time to first token and end-to-end latency, in seconds. REQUIRES: success().
  [[nodiscard]] double ttft_s() const { return (token_ns.front() - send_ns) * 1e-9; }
  [[nodiscard]] double e2el_s() const { return (end_ns - send_ns) * 1e-9; }
};

}  // namespace pagellm::bench

#endif  // PAGELLM_TOOLS_BENCH_REQUEST_RECORD_H_
