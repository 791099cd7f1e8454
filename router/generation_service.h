// GenerationService: the public pagellm.v1.Generation service as served by the router.
// Generate runs through a GenerateReactor (queue, worker, stream); Tokenize, Detokenize and
// GetModelInfo are answered locally from the model description fetched from a worker.
//
// Until SetModel() every call fails with UNAVAILABLE; after StartDraining() Generate does.
//
// Thread-safe: gRPC calls it from its threads.
#ifndef PAGELLM_ROUTER_GENERATION_SERVICE_H_
#define PAGELLM_ROUTER_GENERATION_SERVICE_H_

#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/generation.grpc.pb.h"
#include "router/admission_queue.h"
#include "router/generate_reactor.h"
#include "router/model_context.h"
#include "router/router_metrics.h"
#include "router/worker_pool.h"

namespace pagellm {

// Generate is a raw (bytes) method so that request text that is not UTF-8 gets a clear
// INVALID_ARGUMENT (see request_bytes.h); the other methods are typed.
class GenerationService final
    : public v1::Generation::WithRawCallbackMethod_Generate<v1::Generation::CallbackService> {
 public:
  // Collaborators are borrowed and must outlive the service's gRPC server.
  GenerationService(AdmissionQueue* queue, WorkerPool* pool, RouterMetrics* metrics,
                    absl::Duration request_timeout);
  GenerationService(const GenerationService&) = delete;
  GenerationService& operator=(const GenerationService&) = delete;

  // Publishes the model description; only the first call has an effect.
  void SetModel(std::unique_ptr<ModelContext> model);
  [[nodiscard]] bool has_model() const { return model_.load(std::memory_order_acquire) != nullptr; }
  // New Generate calls fail with UNAVAILABLE from now on; streams already open continue.
  void StartDraining() { draining_.store(true, std::memory_order_release); }
  // Blocks until no Generate stream is open or `deadline` passes; returns true when none is.
  bool WaitForStreams(absl::Time deadline);
  [[nodiscard]] int open_streams() const;

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;

 private:
  const ModelContext* model() const { return model_.load(std::memory_order_acquire); }
  void StreamDone();

  GenerateReactor::Deps deps_;
  RouterMetrics* const metrics_;
  std::unique_ptr<ModelContext> owned_model_;  // set once, under streams_mu_
  std::atomic<const ModelContext*> model_{nullptr};
  std::atomic<bool> draining_{false};
  mutable absl::Mutex streams_mu_;
  int open_streams_ ABSL_GUARDED_BY(streams_mu_) = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_GENERATION_SERVICE_H_
