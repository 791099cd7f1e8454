#include "tools/bench/bench_target.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/api/proto_convert.h"
#include "common/logging.h"

namespace pagellm::bench {

absl::StatusOr<Endpoint> ParseEndpoint(const std::string& name) {
  if (name == "router") return Endpoint::kRouter;
  if (name == "worker") return Endpoint::kWorker;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --endpoint '", name, "': router or worker"));
}

std::string_view EndpointName(Endpoint endpoint) {
  return endpoint == Endpoint::kRouter ? "router" : "worker";
}

BenchTarget::BenchTarget(const std::string& address, Endpoint endpoint)
    : BenchTarget(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()), endpoint) {}

BenchTarget::BenchTarget(std::shared_ptr<grpc::Channel> channel, Endpoint endpoint)
    : endpoint_(endpoint), channel_(std::move(channel)) {
  if (endpoint_ == Endpoint::kRouter) {
    router_ = v1::Generation::NewStub(channel_);
  } else {
    worker_ = v1::Worker::NewStub(channel_);
  }
}

absl::StatusOr<v1::ModelInfo> BenchTarget::GetModelInfo(absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
  v1::ModelInfo info;
  const grpc::Status st = router_ ? router_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info)
                                  : worker_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
  if (!st.ok()) return FromGrpcStatus(st);
  return info;
}

WireRequest BenchTarget::MakeRequest(const std::string& request_id,
                                     std::span<const int32_t> prompt_token_ids,
                                     const v1::SamplingParams& sampling) const {
  if (endpoint_ == Endpoint::kRouter) {
    v1::GenerateRequest r;
    r.set_request_id(request_id);
    r.mutable_token_ids()->mutable_ids()->Add(prompt_token_ids.begin(), prompt_token_ids.end());
    *r.mutable_sampling() = sampling;
    return r;
  }
  v1::WorkerGenerateRequest r;
  r.set_request_id(request_id);
  r.mutable_prompt_token_ids()->Add(prompt_token_ids.begin(), prompt_token_ids.end());
  *r.mutable_sampling() = sampling;
  return r;
}

void BenchTarget::StartGenerate(grpc::ClientContext* context, const WireRequest& request,
                                grpc::ClientReadReactor<v1::GenerateResponse>* reactor) {
  if (const auto* r = std::get_if<v1::GenerateRequest>(&request)) {
    PAGELLM_CHECK(router_ != nullptr, "a router request sent to a {} target",
                  EndpointName(endpoint_));
    router_->async()->Generate(context, r, reactor);
    return;
  }
  PAGELLM_CHECK(worker_ != nullptr, "a worker request sent to a {} target",
                EndpointName(endpoint_));
  worker_->async()->Generate(context, &std::get<v1::WorkerGenerateRequest>(request), reactor);
}

}  // namespace pagellm::bench
