// RouterMetrics: the router's Prometheus metrics, served at /metrics when a listen address is
// given. No per-request labels: series are fixed at construction.
//
//   pagellm_router_queue_length                  gauge    requests waiting for a worker
//   pagellm_router_active_streams                gauge    Generate streams open (queued + running)
//   pagellm_router_workers_ready                 gauge    workers ready to take requests
//   pagellm_router_requests_total{code}          counter  finished Generate calls by gRPC code
//   pagellm_router_time_to_first_token_seconds   histogram  arrival to the first token read
//   pagellm_router_placed_prompt_tokens_total{expected}  counter  prompt tokens sent to workers
//       ("all"), and those the chosen worker was expected to hold cached ("cached")
//   pagellm_router_retries_total{kind}           counter  requests sent to another worker after
//       theirs failed: started over ("start_over"), or a stream resumed after the tokens its
//       client already has ("resume")
//
// Thread-safe (prometheus-cpp metrics are).
#ifndef PAGELLM_ROUTER_ROUTER_METRICS_H_
#define PAGELLM_ROUTER_ROUTER_METRICS_H_

#include <array>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics_exposer.h"
#include "grpcpp/support/status_code_enum.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace pagellm {

class RouterMetrics {
 public:
  // `listen_address` "host:port" starts an HTTP exposer ("127.0.0.1:0" picks a free port);
  // empty: metrics are kept but not served. Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<RouterMetrics>> Create(const std::string& listen_address);
  ~RouterMetrics();
  RouterMetrics(const RouterMetrics&) = delete;
  RouterMetrics& operator=(const RouterMetrics&) = delete;

  void SetQueueLength(double n) { queue_length_->Set(n); }
  void SetWorkersReady(double n) { workers_ready_->Set(n); }
  void SetWorkersOtherModel(double n) { workers_other_model_->Set(n); }
  void StreamOpened() { active_streams_->Increment(); }
  void StreamClosed() { active_streams_->Decrement(); }
  void CountRequest(grpc::StatusCode code);
  void ObserveTimeToFirstToken(absl::Duration d) { ttft_->Observe(absl::ToDoubleSeconds(d)); }
  void CountRetry(bool resume) { (resume ? resumed_ : started_over_)->Increment(); }
  void CountPlacement(int64_t prompt_tokens, int64_t expected_hit_tokens) {
    placed_prompt_tokens_->Increment(static_cast<double>(prompt_tokens));
    placed_hit_tokens_->Increment(static_cast<double>(expected_hit_tokens));
  }

  // The exposer's port; 0 when not serving.
  [[nodiscard]] int port() const { return port_; }
  // The text exposition of every metric (what /metrics returns).
  [[nodiscard]] std::string Serialize() const;

 private:
  RouterMetrics();

  std::shared_ptr<prometheus::Registry> registry_;
  MetricsEndpoint endpoint_;  // not serving when endpoint_.server is null
  int port_ = 0;
  prometheus::Gauge* queue_length_;
  prometheus::Gauge* workers_ready_;
  prometheus::Gauge* workers_other_model_;
  prometheus::Gauge* active_streams_;
  std::array<prometheus::Counter*, 17> requests_;  // by grpc::StatusCode
  prometheus::Histogram* ttft_;
  prometheus::Counter* placed_prompt_tokens_;
  prometheus::Counter* placed_hit_tokens_;
  prometheus::Counter* started_over_;
  prometheus::Counter* resumed_;
};

// The canonical name of a gRPC status code ("OK", "INVALID_ARGUMENT", ...).
const char* StatusCodeName(grpc::StatusCode code);

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_ROUTER_METRICS_H_
