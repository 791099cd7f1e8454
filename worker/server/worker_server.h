// WorkerServer: a running pagellm-worker in one object -- the engine over a backend, the engine
// thread (EngineLoop), the pagellm.v1.Worker gRPC service with grpc.health.v1 and server
// reflection, and the Prometheus metrics -- so that the worker's whole lifecycle (start, health,
// drain, grace, stop) is testable in-process, as RouterServer is.
//
// Health is SERVING from Start() until Shutdown() begins. Shutdown(grace): NOT_SERVING, new
// Generate calls get UNAVAILABLE, running requests may finish for up to `grace` (waited on a
// condition, not polled), then whatever is left is cancelled and the server stops.
//
// Thread-safe. Used by worker_main.cc and the tests.
#ifndef PAGELLM_WORKER_SERVER_WORKER_SERVER_H_
#define PAGELLM_WORKER_SERVER_WORKER_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/api/request_limits.h"
#include "common/auth/grpc_tls.h"
#include "common/tokenizer/special_tokens.h"
#include "common/tokenizer/tokenizer.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/generation.pb.h"
#include "worker/backend/backend.h"
#include "worker/engine/engine.h"
#include "worker/server/engine_loop.h"
#include "worker/server/runtime_lora.h"
#include "worker/server/worker_metrics.h"

namespace pagellm {

class WorkerService;
struct MetricsEndpoint;

class WorkerServer {
 public:
  struct Options {
    std::string listen_address = "127.0.0.1:50061";  // "127.0.0.1:0" picks a free port
    std::string metrics_address;                     // empty: no /metrics endpoint
    std::string model_name;                          // reported in ModelInfo
    std::string chat_template;                       // reported in ModelInfo ("" when none)
    SpecialTokenTexts chat_tokens;                   // reported in ModelInfo
    // /metrics also under vLLM's names (vllm_metrics.h), labelled with model_name.
    bool vllm_metrics = false;
    // The model's default sampling parameters and max_tokens cap, reported in ModelInfo
    // (default_sampling, max_tokens_limit) for the router to apply.
    v1::SamplingParams default_sampling;
    int32_t max_tokens_limit = 0;
    EngineOptions engine;
    int max_receive_message_bytes = kMaxRequestBytes;
    // TLS of the listener (optionally requiring client certificates: mutual TLS with the router).
    ServerTlsFiles tls;
    // The router's shared secret; non-empty: calls without it are refused (worker_service.h).
    std::string worker_token;
    // Runtime LoRA updating (LoadLoraAdapter, UnloadLoraAdapter); off by default.
    RuntimeLoraOptions lora;
    // Seconds on a monotonic clock for the latency metrics (empty: steady clock).
    std::function<double()> clock;
  };

  // Builds the engine over `backend` and `tokenizer` (both owned from here on) and starts
  // serving. Errors: the engine's (InvalidArgument for bad options), Unavailable when a port
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<WorkerServer>> Start(Options options,
                                                             std::unique_ptr<Backend> backend,
                                                             std::unique_ptr<Tokenizer> tokenizer);
  // Shutdown() with no grace if it was not called.
  ~WorkerServer();
  WorkerServer(const WorkerServer&) = delete;
  WorkerServer& operator=(const WorkerServer&) = delete;

  // Graceful stop (see the file comment). Idempotent: a later or concurrent call returns once the
  // first one is over.
  void Shutdown(absl::Duration grace);

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int metrics_port() const;
  [[nodiscard]] bool serving() const;
  [[nodiscard]] EngineLoad load() const { return loop_->load(); }
  // Blocks until no request is active or `timeout` passes; returns whether it is idle.
  bool WaitUntilIdle(absl::Duration timeout) {
    return loop_->WaitUntilIdle(absl::ToDoubleSeconds(timeout));
  }
  [[nodiscard]] const WorkerMetrics& metrics() const { return *metrics_; }
  [[nodiscard]] const Tokenizer& tokenizer() const { return *tokenizer_; }
  // The longest prompt + max_tokens a request may have.
  [[nodiscard]] int64_t max_model_len() const { return max_model_len_; }

 private:
  WorkerServer() = default;

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<WorkerMetrics> metrics_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<RuntimeLora> lora_;  // uses loop_; used by service_
  std::unique_ptr<WorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  int64_t max_model_len_ = 0;

  mutable absl::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;  // Shutdown has begun
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;      // and is over
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_SERVER_WORKER_SERVER_H_
