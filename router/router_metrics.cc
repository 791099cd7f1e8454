#include "router/router_metrics.h"

#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics_exposer.h"
#include "prometheus/text_serializer.h"

namespace pagellm {

const char* StatusCodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[17] = {"OK",
                                             "CANCELLED",
                                             "UNKNOWN",
                                             "INVALID_ARGUMENT",
                                             "DEADLINE_EXCEEDED",
                                             "NOT_FOUND",
                                             "ALREADY_EXISTS",
                                             "PERMISSION_DENIED",
                                             "RESOURCE_EXHAUSTED",
                                             "FAILED_PRECONDITION",
                                             "ABORTED",
                                             "OUT_OF_RANGE",
                                             "UNIMPLEMENTED",
                                             "INTERNAL",
                                             "UNAVAILABLE",
                                             "DATA_LOSS",
                                             "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : "UNKNOWN";
}

RouterMetrics::RouterMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  queue_length_ = &prometheus::BuildGauge()
                       .Name("pagellm_router_queue_length")
                       .Help("Generate requests waiting in the router's queue for a worker")
                       .Register(r)
                       .Add({});
  active_streams_ = &prometheus::BuildGauge()
                         .Name("pagellm_router_active_streams")
                         .Help("Generate streams open at the router (queued or running)")
                         .Register(r)
                         .Add({});
  workers_ready_ = &prometheus::BuildGauge()
                        .Name("pagellm_router_workers_ready")
                        .Help("Workers ready to take requests")
                        .Register(r)
                        .Add({});
  workers_other_model_ =
      &prometheus::BuildGauge()
           .Name("pagellm_router_workers_other_model")
           .Help("Workers answering but serving another model than the router's (not used)")
           .Register(r)
           .Add({});
  auto& placed = prometheus::BuildCounter()
                     .Name("pagellm_router_placed_prompt_tokens_total")
                     .Help(
                         "Prompt tokens of requests sent to workers, and of them the tokens "
                         "the chosen worker was expected to have in its prefix cache")
                     .Register(r);
  placed_prompt_tokens_ = &placed.Add({{"expected", "all"}});
  placed_hit_tokens_ = &placed.Add({{"expected", "cached"}});
  auto& retries = prometheus::BuildCounter()
                      .Name("pagellm_router_retries_total")
                      .Help(
                          "Requests sent to another worker after theirs failed: started over, "
                          "or streams resumed after the tokens their clients already have")
                      .Register(r);
  started_over_ = &retries.Add({{"kind", "start_over"}});
  resumed_ = &retries.Add({{"kind", "resume"}});
  auto& requests = prometheus::BuildCounter()
                       .Name("pagellm_router_requests_total")
                       .Help("Generate calls finished, by gRPC status code")
                       .Register(r);
  for (int c = 0; c < 17; ++c) {
    requests_[c] = &requests.Add({{"code", StatusCodeName(static_cast<grpc::StatusCode>(c))}});
  }
  ttft_ =
      &prometheus::BuildHistogram()
           .Name("pagellm_router_time_to_first_token_seconds")
           .Help("Time from a Generate call's arrival to its first token from a worker")
           .Register(r)
           .Add({}, prometheus::Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                            0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0});
}

RouterMetrics::~RouterMetrics() = default;

absl::StatusOr<std::unique_ptr<RouterMetrics>> RouterMetrics::Create(
    const std::string& listen_address) {
  std::unique_ptr<RouterMetrics> m(new RouterMetrics());
  if (listen_address.empty()) return m;
  absl::StatusOr<MetricsEndpoint> endpoint = ServeMetrics(listen_address, {m->registry_});
  if (!endpoint.ok()) return endpoint.status();
  m->port_ = endpoint->port;
  m->endpoint_ = *std::move(endpoint);
  return m;
}

void RouterMetrics::CountRequest(grpc::StatusCode code) {
  const int i = static_cast<int>(code);
  requests_[i >= 0 && i < 17 ? i : static_cast<int>(grpc::StatusCode::UNKNOWN)]->Increment();
}

std::string RouterMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace pagellm
