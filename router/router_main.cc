// pagellm-router: the public pagellm.v1.Generation endpoint in front of pagellm-worker
// processes. Needs no weights: the model's description comes from a worker.
//
//   pagellm-router --workers 10.0.0.5:50052,10.0.0.6:50052
//   pagellm-router --worker-dns pagellm-worker-headless:50052 --port 50051 --metrics-port 9401
//
// SIGTERM / SIGINT: NOT_SERVING, refuse new requests, let open streams finish for up to
// --shutdown-grace seconds, exit 0.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flags_util.h"
#include "common/logging.h"
#include "common/signal_wait.h"
#include "router/router_server.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on");
ABSL_FLAG(int, port, 50051, "gRPC port (pagellm.v1.Generation, health, reflection)");
ABSL_FLAG(int, metrics_port, 9401, "Prometheus /metrics port; 0 turns metrics serving off");
ABSL_FLAG(std::string, workers, "", "Comma-separated worker addresses host:port");
ABSL_FLAG(std::string, worker_dns, "",
          "name:port resolved every --dns-interval seconds; each address is a worker "
          "(e.g. a Kubernetes headless service)");
ABSL_FLAG(double, dns_interval, 5.0, "Seconds between DNS resolutions of --worker-dns");
ABSL_FLAG(int, max_queue, 1024, "Requests that may wait for a worker; more are refused");
ABSL_FLAG(double, request_timeout, 600.0,
          "Deadline in seconds for requests whose client sets none");
ABSL_FLAG(double, shutdown_grace, 30.0, "Seconds open streams get to finish after SIGTERM/SIGINT");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "pagellm-router --workers host:port[,host:port...] | --worker-dns name:port [flags]");
  pagellm::cli::ParseFlags(argc, argv);
  pagellm::InitLogging(absl::GetFlag(FLAGS_log_level).c_str());

  if (absl::Status s = pagellm::InstallTerminationSignals(); !s.ok()) {
    PLOG_ERROR("{}", s.ToString());
    return 1;
  }

  pagellm::RouterServer::Options options;
  options.listen_address = absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  if (absl::GetFlag(FLAGS_metrics_port) != 0) {
    options.metrics_address =
        absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_metrics_port));
  }
  for (absl::string_view w :
       absl::StrSplit(absl::GetFlag(FLAGS_workers), ',', absl::SkipWhitespace())) {
    options.workers.addresses.emplace_back(w);
  }
  options.workers.dns_target = absl::GetFlag(FLAGS_worker_dns);
  options.workers.dns_interval = absl::Seconds(absl::GetFlag(FLAGS_dns_interval));
  if (absl::GetFlag(FLAGS_max_queue) <= 0) {
    std::fprintf(stderr, "--max-queue must be > 0\n");
    return 2;
  }
  options.max_queue = static_cast<size_t>(absl::GetFlag(FLAGS_max_queue));
  options.request_timeout = absl::GetFlag(FLAGS_request_timeout) > 0
                                ? absl::Seconds(absl::GetFlag(FLAGS_request_timeout))
                                : absl::InfiniteDuration();

  auto router = pagellm::RouterServer::Start(std::move(options));
  if (!router.ok()) {
    PLOG_ERROR("{}", router.status().ToString());
    return 1;
  }
  const int sig = pagellm::WaitForTerminationSignal();
  PLOG_INFO("{} received: draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*router)->Shutdown(absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace)));
  PLOG_INFO("pagellm-router stopped");
  return 0;
}
