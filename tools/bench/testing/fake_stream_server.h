// FakeStreamServer: an in-process pagellm.v1.Generation and pagellm.v1.Worker on one port, for
// testing the serving benchmark without a model. Each Generate call streams a fixed number of
// tokens at a set pace and ends with a usage message, or fails at once with a set status.
//
// Pace: the first message goes out `first_token_delay` after the call arrives, each later one
// `token_interval` after the previous write completed; each message carries up to
// `tokens_per_message` tokens. Delays are kept by one timer thread, so many concurrent streams
// need no thread each.
#ifndef PAGELLM_TOOLS_BENCH_TESTING_FAKE_STREAM_SERVER_H_
#define PAGELLM_TOOLS_BENCH_TESTING_FAKE_STREAM_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/worker.pb.h"

namespace pagellm::bench::testing {

class FakeStreamServer {
 public:
  struct Options {
    int32_t vocab_size = 1000;
    int32_t max_model_len = 4096;
    int32_t tokens_per_request = 0;  // 0: the request's max_tokens
    int32_t tokens_per_message = 1;
    absl::Duration first_token_delay = absl::ZeroDuration();
    absl::Duration token_interval = absl::ZeroDuration();
    // Calls number k, 2k, 3k, ... (counting from 1, both services together) fail at once with
    // fail_code. 0: none fail.
    int32_t fail_every = 0;
    grpc::StatusCode fail_code = grpc::StatusCode::UNAVAILABLE;
  };

  // What the server has seen, as one snapshot.
  struct Stats {
    int64_t router_calls = 0;            // Generation/Generate
    int64_t worker_calls = 0;            // Worker/Generate
    int64_t failed_calls = 0;            // failed on purpose (fail_every)
    int64_t max_concurrent_streams = 0;  // most streams open at once
    int64_t tokens_sent = 0;
  };

  // Listens on 127.0.0.1 on a free port. Internal on a failure to start.
  static absl::StatusOr<std::unique_ptr<FakeStreamServer>> Start(Options options);
  // Shuts the server down; calls still running are cancelled.
  ~FakeStreamServer();
  FakeStreamServer(const FakeStreamServer&) = delete;
  FakeStreamServer& operator=(const FakeStreamServer&) = delete;

  // "127.0.0.1:PORT".
  [[nodiscard]] std::string address() const;
  // A channel to the server (in-process clients).
  [[nodiscard]] std::shared_ptr<grpc::Channel> NewChannel() const;
  // Thread-safe.
  [[nodiscard]] Stats stats() const;
  // Every Generate request so far, in arrival order; router requests as the worker request
  // they amount to (token_ids prompt, sampling). Thread-safe.
  [[nodiscard]] std::vector<v1::WorkerGenerateRequest> requests() const;

  class Impl;

 private:
  explicit FakeStreamServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagellm::bench::testing

#endif  // PAGELLM_TOOLS_BENCH_TESTING_FAKE_STREAM_SERVER_H_
