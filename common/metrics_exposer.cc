#include "common/metrics_exposer.h"

#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pagellm {

absl::StatusOr<MetricsEndpoint> ServeMetrics(const std::string& listen_address,
                                             std::shared_ptr<prometheus::Registry> registry) {
  MetricsEndpoint m;
  try {
    m.exposer = std::make_unique<prometheus::Exposer>(listen_address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen_address, ": ", e.what()));
  }
  m.exposer->RegisterCollectable(registry);
  const std::vector<int> ports = m.exposer->GetListeningPorts();
  m.port = ports.empty() ? 0 : ports.front();
  return m;
}

}  // namespace pagellm
