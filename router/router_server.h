// RouterServer: a running pagellm-router: the gRPC server (Generation, grpc.health.v1, server
// reflection), the worker pool, the admission queue and the metrics, plus two threads:
//   - the ticker: every poll_interval polls the workers' load and expires queued requests whose
//     deadline passed;
//   - the bootstrap: fetches ModelInfo and the tokenizer from the first worker that answers
//     (retrying until one does), then exits.
// Health is SERVING while the model is known, at least one worker is ready, and the router is
// not draining; NOT_SERVING otherwise.
//
// Thread-safe. Used by router_main.cc, the end-to-end tests and the benchmark.
#ifndef PAGELLM_ROUTER_ROUTER_SERVER_H_
#define PAGELLM_ROUTER_ROUTER_SERVER_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/auth/grpc_tls.h"
#include "common/auth/secret_set.h"
#include "grpcpp/grpcpp.h"
#include "router/admission_queue.h"
#include "router/generation_service.h"
#include "router/http/http_server.h"
#include "router/http/openai_frontend.h"
#include "router/router_metrics.h"
#include "router/worker_pool.h"

namespace pagellm {

class RouterServer {
 public:
  struct Options {
    std::string listen_address = "127.0.0.1:50051";  // "127.0.0.1:0" picks a free port
    std::string metrics_address;                     // empty: no /metrics endpoint
    // The OpenAI-compatible HTTP API (router/http/openai_frontend.h); port -1: none.
    HttpServer::Options http = DefaultHttpOptions();
    OpenAiFrontend::Options openai;
    // TLS of the public gRPC listener (the HTTP listener has its own files in `http`).
    ServerTlsFiles tls;
    // Accepted API keys (gRPC "authorization: Bearer" metadata, the HTTP Authorization header);
    // null or empty: no authentication. The caller may Set() new keys while serving.
    std::shared_ptr<ReloadableSecrets> api_keys;
    WorkerPool::Options workers;
    size_t max_queue = 1024;
    // Queue waiting requests by (priority, arrival) and accept nonzero priorities (vLLM's
    // --scheduling-policy priority; the workers must run it too). Off: first come, first served,
    // and a nonzero priority is INVALID_ARGUMENT.
    bool priority_scheduling = false;
    absl::Duration request_timeout = absl::Seconds(600);  // when the client sets no deadline
    absl::Duration poll_interval = absl::Milliseconds(200);
    absl::Duration model_fetch_timeout = absl::Seconds(30);  // per GetTokenizer attempt
    // Serve /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's runtime LoRA updating),
    // fanned out to the workers, each waited for at most lora_change_timeout. Off: 404.
    bool allow_runtime_lora_updating = false;
    absl::Duration lora_change_timeout = absl::Seconds(120);
  };

  // Starts serving. Errors: InvalidArgument for bad options, Unavailable when a port cannot be
  // bound.
  static absl::StatusOr<std::unique_ptr<RouterServer>> Start(Options options);
  // Shuts down at once (Shutdown with no grace) if Shutdown was not called.
  ~RouterServer();
  RouterServer(const RouterServer&) = delete;
  RouterServer& operator=(const RouterServer&) = delete;

  // Graceful stop: NOT_SERVING, new Generate calls fail with UNAVAILABLE, open streams get up to
  // `grace` to finish, then the server stops (cancelling what is left) and the threads end.
  // Idempotent: a later or concurrent call returns once the first one is over.
  void Shutdown(absl::Duration grace);

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int metrics_port() const { return metrics_->port(); }
  // The HTTP API's port; 0 when it is off.
  [[nodiscard]] int http_port() const { return http_ != nullptr ? http_->port() : 0; }
  [[nodiscard]] bool serving() const;
  [[nodiscard]] bool has_model() const { return service_->has_model(); }
  [[nodiscard]] WorkerPool::Stats worker_stats() const { return pool_->GetStats(); }
  [[nodiscard]] size_t queue_length() const { return queue_->size(); }
  // Generate streams not yet destroyed: the gRPC API's and the HTTP API's.
  [[nodiscard]] int open_streams() const { return service_->open_streams(); }
  [[nodiscard]] const RouterMetrics& metrics() const { return *metrics_; }

 private:
  explicit RouterServer(Options options);
  static HttpServer::Options DefaultHttpOptions() {
    HttpServer::Options o;
    o.port = -1;
    return o;
  }
  void OnPoolChange();
  void UpdateHealth();
  // Loads on each worker that just became ready the adapters the others loaded at run time
  // (WorkerPool::TakeAdapterReplays), with --allow-runtime-lora-updating.
  void ReplayAdapters();
  void TickerLoop();
  void BootstrapLoop();
  absl::Status FetchModel(WorkerEndpoint& worker);

  const Options options_;
  std::unique_ptr<RouterMetrics> metrics_;
  std::unique_ptr<AdmissionQueue> queue_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<GenerationService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<OpenAiFrontend> openai_;  // with http_, when the HTTP API is on
  std::unique_ptr<HttpServer> http_;

  // Pool changes reach the queue and health while wired_. The pool calls back on its own threads,
  // so Shutdown clears wired_ and then waits until no callback is in OnPoolChange: after that
  // none touches the members it is about to destroy.
  absl::Mutex wire_mu_;
  bool wired_ ABSL_GUARDED_BY(wire_mu_) = false;
  // In OnPoolChange now, or runtime LoRA changes whose workers have not all answered.
  int pool_callbacks_ ABSL_GUARDED_BY(wire_mu_) = 0;
  std::atomic<bool> draining_{false};
  absl::Notification stop_;  // threads exit
  std::thread ticker_;
  std::thread bootstrap_;
  absl::Mutex fetch_mu_;
  grpc::ClientContext* fetch_context_ ABSL_GUARDED_BY(fetch_mu_) = nullptr;  // bootstrap's call
  absl::Mutex shutdown_mu_;
  bool shutting_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;  // Shutdown has begun
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;      // and is over

  mutable absl::Mutex health_mu_;
  bool serving_ ABSL_GUARDED_BY(health_mu_) = false;
  bool health_set_ ABSL_GUARDED_BY(health_mu_) = false;    // serving_ has been published
  bool health_ready_ ABSL_GUARDED_BY(health_mu_) = false;  // server_ exists: may be set
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_ROUTER_SERVER_H_
