// Serving a Prometheus registry on /metrics (prometheus-cpp's civetweb exposer), for the router
// and the worker alike.
#ifndef PAGELLM_COMMON_METRICS_EXPOSER_H_
#define PAGELLM_COMMON_METRICS_EXPOSER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace pagellm {

struct MetricsEndpoint {
  std::unique_ptr<prometheus::Exposer> exposer;
  int port = 0;  // the bound port ("host:0" picks one)
};

// Serves `registry` on `listen_address` ("host:port"). Unavailable when it cannot be bound.
absl::StatusOr<MetricsEndpoint> ServeMetrics(const std::string& listen_address,
                                             std::shared_ptr<prometheus::Registry> registry);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_METRICS_EXPOSER_H_
