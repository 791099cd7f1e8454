// GenerateReactor: a gRPC client's Generate stream through the router: the server side
// (ServerWriteReactor) of a RoutedStream, which does the routing (see routed_stream.h).
// Messages are serialized here (the Generate method is raw: see request_bytes.h) and written
// one at a time; a client that cancels, disconnects or passes its deadline cancels the stream.
//
// Thread-safety: gRPC and the stream call in from their threads. The reactor deletes itself
// (and its stream) in OnDone.
#ifndef PAGELLM_ROUTER_GENERATE_REACTOR_H_
#define PAGELLM_ROUTER_GENERATE_REACTOR_H_

#include <memory>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/generation.pb.h"
#include "router/model_context.h"
#include "router/routed_stream.h"
#include "router/router_metrics.h"

namespace pagellm {

class GenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                              public RoutedStream::Client {
 public:
  GenerateReactor(const RoutedStream::Deps& deps, const ModelContext& model,
                  grpc::CallbackServerContext* context, const v1::GenerateRequest& request);

  // RoutedStream::Client. StartWrite is only called with no write outstanding, so wire_ is
  // free.
  bool StartWrite(const v1::GenerateResponse& m) override;
  void Finish(const absl::Status& status) override;

  // ServerWriteReactor.
  void OnWriteDone(bool ok) override { stream_->OnWriteDone(ok); }
  void OnCancel() override { stream_->Cancel(); }
  void OnDone() override { delete this; }

 private:
  ~GenerateReactor() override = default;

  grpc::ByteBuffer wire_;  // the message being written, serialized
  // Set before gRPC can call the reactor (it is not bound to its RPC until the constructor
  // returns).
  std::unique_ptr<RoutedStream> stream_;
};

// A stream finished before it started (router not ready, draining): Finish(status) at once.
class RejectedGenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  RejectedGenerateReactor(RouterMetrics* metrics, const grpc::Status& status);
  void OnDone() override { delete this; }
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_GENERATE_REACTOR_H_
