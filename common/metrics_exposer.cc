#include "common/metrics_exposer.h"

#include <iterator>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "prometheus/text_serializer.h"

namespace pagellm {

class MetricsServer {
 public:
  explicit MetricsServer(std::vector<std::shared_ptr<const prometheus::Collectable>> sources)
      : sources_(std::move(sources)) {
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::vector<prometheus::MetricFamily> families;
      for (const auto& source : sources_) {
        std::vector<prometheus::MetricFamily> more = source->Collect();
        families.insert(families.end(), std::make_move_iterator(more.begin()),
                        std::make_move_iterator(more.end()));
      }
      res.set_content(prometheus::TextSerializer().Serialize(families),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
  }
  ~MetricsServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  // The bound port, or -1.
  int Bind(const std::string& host, int port) {
    if (port == 0) return server_.bind_to_any_port(host);
    return server_.bind_to_port(host, port) ? port : -1;
  }
  void Start() {
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }

 private:
  const std::vector<std::shared_ptr<const prometheus::Collectable>> sources_;
  httplib::Server server_;
  std::thread thread_;
};

MetricsEndpoint::MetricsEndpoint() = default;
MetricsEndpoint::~MetricsEndpoint() = default;
MetricsEndpoint::MetricsEndpoint(MetricsEndpoint&&) noexcept = default;
MetricsEndpoint& MetricsEndpoint::operator=(MetricsEndpoint&&) noexcept = default;

absl::StatusOr<MetricsEndpoint> ServeMetrics(
    const std::string& listen_address,
    std::vector<std::shared_ptr<const prometheus::Collectable>> sources) {
  const size_t colon = listen_address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen_address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", listen_address, "' needs host:port"));
  }
  std::string host = listen_address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  MetricsEndpoint m;
  m.server = std::make_unique<MetricsServer>(std::move(sources));
  m.port = m.server->Bind(host, port);
  if (m.port <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen_address));
  }
  m.server->Start();
  return m;
}

}  // namespace pagellm
