// BenchTarget: the server a serving benchmark drives, through either of pagellm's streaming
// Generate RPCs:
//   router  pagellm.v1.Generation/Generate with token_ids prompts (the public API), or
//   worker  pagellm.v1.Worker/Generate straight to one worker (no router in the path),
// so one run against each shows what the router adds. Both answer with GenerateResponse streams.
#ifndef PAGELLM_TOOLS_BENCH_BENCH_TARGET_H_
#define PAGELLM_TOOLS_BENCH_BENCH_TARGET_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/generation.grpc.pb.h"
#include "pagellm/v1/worker.grpc.pb.h"

namespace pagellm::bench {

enum class Endpoint { kRouter, kWorker };

// "router" or "worker". InvalidArgument otherwise.
absl::StatusOr<Endpoint> ParseEndpoint(const std::string& name);
std::string_view EndpointName(Endpoint endpoint);

// A request message of either endpoint's Generate.
using WireRequest = std::variant<v1::GenerateRequest, v1::WorkerGenerateRequest>;

// Thread-safe: the stubs and the channel are (StartGenerate may be called from any thread).
class BenchTarget {
 public:
  // Talks to `address` (host:port) over an insecure channel. The channel connects lazily: an
  // unreachable server shows up as the first call's error.
  BenchTarget(const std::string& address, Endpoint endpoint);
  // For tests: an existing channel (e.g. an in-process server's).
  BenchTarget(std::shared_ptr<grpc::Channel> channel, Endpoint endpoint);
  BenchTarget(const BenchTarget&) = delete;
  BenchTarget& operator=(const BenchTarget&) = delete;

  [[nodiscard]] Endpoint endpoint() const { return endpoint_; }

  // The served model's limits (vocab_size, max_model_len). The RPC's error on failure, e.g.
  // UNAVAILABLE for a server that is not listening, DEADLINE_EXCEEDED after `timeout`.
  absl::StatusOr<v1::ModelInfo> GetModelInfo(absl::Duration timeout);

  // The endpoint's request message for a prompt of token ids.
  [[nodiscard]] WireRequest MakeRequest(const std::string& request_id,
                                        std::span<const int32_t> prompt_token_ids,
                                        const v1::SamplingParams& sampling) const;

  // Binds `reactor` to a new Generate call; the caller then calls StartRead/StartCall on it.
  // REQUIRES: `request` was made by this target's MakeRequest; `context` and `request` outlive
  // the call (until the reactor's OnDone).
  void StartGenerate(grpc::ClientContext* context, const WireRequest& request,
                     grpc::ClientReadReactor<v1::GenerateResponse>* reactor);

 private:
  const Endpoint endpoint_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> router_;  // set for kRouter
  std::unique_ptr<v1::Worker::Stub> worker_;      // set for kWorker
};

}  // namespace pagellm::bench

#endif  // PAGELLM_TOOLS_BENCH_BENCH_TARGET_H_
