// Serving a Prometheus registry on /metrics in the text exposition format, for the router and
// the worker alike: cpp-httplib's server on its own threads (ordinary-sized stacks), the
// registry serialized by prometheus-cpp at each scrape. (prometheus-cpp's own civetweb exposer
// runs handlers on 100 KiB stacks, which a process with CUDA's page-aligned thread-local storage
// overflows.)
#ifndef PAGELLM_COMMON_METRICS_EXPOSER_H_
#define PAGELLM_COMMON_METRICS_EXPOSER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"

namespace pagellm {

class MetricsServer;

// A serving endpoint; destroying it stops the server and joins its thread.
struct MetricsEndpoint {
  MetricsEndpoint();
  ~MetricsEndpoint();
  MetricsEndpoint(MetricsEndpoint&&) noexcept;
  MetricsEndpoint& operator=(MetricsEndpoint&&) noexcept;

  std::unique_ptr<MetricsServer> server;
  int port = 0;  // the bound port ("host:0" picks one)
};

// Serves `sources` (a registry, and views of it) on `listen_address` ("host:port",
// "[v6]:port"), their families one after another. InvalidArgument for an address without a port;
// Unavailable when it cannot be bound. Each scrape calls the sources' Collect() on the server's
// threads: they must be thread-safe (prometheus::Registry is).
absl::StatusOr<MetricsEndpoint> ServeMetrics(
    const std::string& listen_address,
    std::vector<std::shared_ptr<const prometheus::Collectable>> sources);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_METRICS_EXPOSER_H_
