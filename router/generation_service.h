// GenerationService: the public pagellm.v1.Generation service as served by the router.
// Generate runs through a GenerateReactor around a RoutedStream (queue, worker, stream);
// in-process clients (the OpenAI HTTP API) open RoutedStreams directly (Open). Tokenize,
// Detokenize and GetModelInfo are answered locally from the model description fetched from a
// worker.
//
// Until SetModel() every call fails with UNAVAILABLE; after StartDraining() Generate does. With
// API keys configured, every call needs "authorization: Bearer <key>" metadata (UNAUTHENTICATED
// otherwise); grpc.health.v1 and reflection are other services and stay open.
//
// Thread-safe: gRPC calls it from its threads.
#ifndef PAGELLM_ROUTER_GENERATION_SERVICE_H_
#define PAGELLM_ROUTER_GENERATION_SERVICE_H_

#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/auth/secret_set.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/generation.grpc.pb.h"
#include "router/admission_queue.h"
#include "router/generate_reactor.h"
#include "router/model_context.h"
#include "router/routed_stream.h"
#include "router/router_metrics.h"
#include "router/worker_pool.h"

namespace pagellm {

// Generate, Tokenize and Detokenize are raw (bytes) methods so that a request protobuf cannot
// parse (text that is not UTF-8, garbage) gets a clear INVALID_ARGUMENT naming the problem
// (common/api/wire_request.h); GetModelInfo is typed.
class GenerationService final
    : public v1::Generation::WithRawCallbackMethod_Generate<
          v1::Generation::WithRawCallbackMethod_Tokenize<
              v1::Generation::WithRawCallbackMethod_Detokenize<v1::Generation::CallbackService>>> {
 public:
  // Collaborators are borrowed and must outlive the service's gRPC server.
  // `api_keys` may be null (no authentication).
  GenerationService(AdmissionQueue* queue, WorkerPool* pool, RouterMetrics* metrics,
                    absl::Duration request_timeout, const ReloadableSecrets* api_keys = nullptr);
  GenerationService(const GenerationService&) = delete;
  GenerationService& operator=(const GenerationService&) = delete;

  // Publishes the model description, replacing any earlier one (calls in flight keep theirs).
  void SetModel(std::shared_ptr<ModelContext> model);
  // The current model (null before SetModel). One lock per call, not per token.
  [[nodiscard]] std::shared_ptr<ModelContext> model() const;
  [[nodiscard]] bool has_model() const { return model() != nullptr; }
  // New Generate calls fail with UNAVAILABLE from now on; streams already open continue.
  void StartDraining() { draining_.store(true, std::memory_order_release); }
  // Blocks until no Generate stream is open or `deadline` passes; returns true when none is.
  bool WaitForStreams(absl::Time deadline);
  [[nodiscard]] int open_streams() const;

  // Opens a Generate stream for an in-process client that has authenticated its caller itself:
  // the same checks (model known, not draining), validation, admission and routing as the gRPC
  // method. The stream counts as open until it is destroyed. UNAVAILABLE when the router has no
  // model yet or is draining; otherwise the stream, not started: the caller calls Start.
  absl::StatusOr<std::unique_ptr<RoutedStream>> Open(const v1::GenerateRequest& request,
                                                     absl::Time client_deadline,
                                                     RoutedStream::Client* client);

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;

 private:
  void StreamDone();
  // Whether the call carries an accepted API key (always, with none configured).
  [[nodiscard]] bool Authorized(const grpc::CallbackServerContext* context) const;

  RoutedStream::Deps deps_;
  RouterMetrics* const metrics_;
  const ReloadableSecrets* const api_keys_;
  mutable absl::Mutex model_mu_;
  std::shared_ptr<ModelContext> model_ ABSL_GUARDED_BY(model_mu_);
  std::atomic<bool> draining_{false};
  mutable absl::Mutex streams_mu_;
  int open_streams_ ABSL_GUARDED_BY(streams_mu_) = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_GENERATION_SERVICE_H_
