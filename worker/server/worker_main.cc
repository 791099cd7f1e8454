// pagellm-worker: serves one model on one device (the CPU by default) over the internal
// pagellm.v1.Worker gRPC service, with grpc.health.v1, server reflection and Prometheus metrics.
// The wiring is WorkerServer's; this file turns flags into options and waits for a signal.
//
//   pagellm-worker --model models/SmolLM2-135M-Instruct.Q4_1.gguf [--port 50061]
//                  [--metrics-port 9400] [engine and model flags as pagellm generate]
//
// SIGTERM / SIGINT: health goes NOT_SERVING, new requests are refused (UNAVAILABLE), running ones
// may finish for --shutdown-grace seconds, then the process exits 0.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/api/sampling_defaults.h"
#include "common/auth/secret_set.h"
#include "common/flags_util.h"
#include "common/logging.h"
#include "common/signal_wait.h"
#include "common/status_macros.h"
#include "worker/flags/engine_flags.h"
#include "worker/flags/open_from_flags.h"
#include "worker/model/model_loader.h"
#include "worker/server/generation_defaults.h"
#include "worker/server/worker_server.h"

ABSL_FLAG(std::string, host, "127.0.0.1",
          "address to listen on; 0.0.0.0 for every interface (as a pod must)");
ABSL_FLAG(int32_t, port, 50061, "gRPC port (0: pick a free one and print it)");
ABSL_FLAG(int32_t, metrics_port, 9400, "Prometheus /metrics port (0: off)");
ABSL_FLAG(double, shutdown_grace, 30.0, "seconds running requests may finish after SIGTERM");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warn, error");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain: serve over TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require client certificates it signed (mutual TLS with the router)");
ABSL_FLAG(std::string, worker_token, "",
          "Refuse calls without this token (the router's --worker-token); also from "
          "--worker-token-file or $PAGELLM_WORKER_TOKEN (preferred: flags show in process lists)");
ABSL_FLAG(std::string, worker_token_file, "", "File holding --worker-token");
ABSL_FLAG(std::string, served_model_name, "",
          "the model's name to the router and the OpenAI API, and the model_name label of "
          "--vllm-metrics (empty: the model file's name)");
ABSL_FLAG(bool, vllm_metrics, false,
          "/metrics also under vLLM's metric names and labels (vllm:num_requests_waiting, "
          "vllm:time_to_first_token_seconds, ...), for dashboards and autoscalers made for vLLM");
ABSL_FLAG(std::string, generation_config, "auto",
          "default sampling parameters: auto (the checkpoint's generation_config.json), vllm "
          "(none), or a directory holding a generation_config.json");
ABSL_FLAG(std::string, override_generation_config, "",
          "JSON object of generation-config fields set over --generation-config's, e.g. "
          "'{\"temperature\": 0.5, \"max_new_tokens\": 512}' (its max_new_tokens caps every "
          "request)");
ABSL_FLAG(std::string, lora_dir, "",
          "the directory adapters load from while serving: a lora_path resolves inside it only");

namespace {

// Opens what the flags name and starts serving it.
absl::StatusOr<std::unique_ptr<pagellm::WorkerServer>> StartFromFlags() {
  ASSIGN_OR_RETURN(pagellm::EngineOptions eo, pagellm::cli::EngineOptionsFromFlags());
  // A --generation-config directory also gives the end-of-generation ids, as in vLLM.
  const std::string generation_config = absl::GetFlag(FLAGS_generation_config);
  ASSIGN_OR_RETURN(
      pagellm::cli::OpenedModel model,
      pagellm::cli::OpenModelFromFlags(generation_config == "auto" || generation_config == "vllm"
                                           ? std::string()
                                           : generation_config));
  pagellm::WorkerServer::Options so;
  so.engine = eo;
  so.model_name = absl::GetFlag(FLAGS_served_model_name).empty()
                      ? model.model_name
                      : absl::GetFlag(FLAGS_served_model_name);
  so.vllm_metrics = absl::GetFlag(FLAGS_vllm_metrics);
  ASSIGN_OR_RETURN(pagellm::GenerationDefaults defaults,
                   pagellm::ResolveGenerationDefaults(
                       absl::GetFlag(FLAGS_generation_config),
                       absl::GetFlag(FLAGS_override_generation_config), model.generation_config,
                       [](const std::string& dir) { return pagellm::ReadGenerationConfig(dir); }));
  if (defaults.sampling.ByteSizeLong() > 0 || defaults.max_tokens_limit > 0) {
    // As vLLM warns: outputs differ from the API's defaults unless a request sets its own.
    PLOG_WARN(
        "default sampling parameters from {}: {}{} (a request's own values win; "
        "--generation-config vllm turns them off)",
        defaults.source, pagellm::DescribeSamplingDefaults(defaults.sampling),
        defaults.max_tokens_limit > 0
            ? absl::StrCat("; max_tokens at most ", defaults.max_tokens_limit)
            : "");
  }
  so.default_sampling = std::move(defaults.sampling);
  so.max_tokens_limit = defaults.max_tokens_limit;
  so.chat_template = model.chat_template;
  so.chat_tokens = model.chat_tokens;
  so.listen_address = absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  if (absl::GetFlag(FLAGS_metrics_port) > 0) {
    so.metrics_address =
        absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_metrics_port));
  }
  so.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
            absl::GetFlag(FLAGS_tls_client_ca)};
  ASSIGN_OR_RETURN(so.worker_token, pagellm::ReadSecret(absl::GetFlag(FLAGS_worker_token),
                                                        absl::GetFlag(FLAGS_worker_token_file),
                                                        "PAGELLM_WORKER_TOKEN"));
  if (so.worker_token.empty() && so.tls.client_ca.empty()) {
    PLOG_WARN(
        "no --worker-token and no --tls-client-ca: any client that reaches this port can "
        "use the worker directly, bypassing the router's admission and API keys");
  }
  so.lora.enabled = pagellm::cli::AllowRuntimeLoraUpdatingFromFlags();
  so.lora.lora_dir = absl::GetFlag(FLAGS_lora_dir);
  so.lora.load = std::move(model.lora_loader);
  return pagellm::WorkerServer::Start(std::move(so), std::move(model.backend),
                                      std::move(model.tokenizer));
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "pagellm-worker: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("pagellm-worker --model PATH [flags]");
  pagellm::cli::ParseFlags(argc, argv);
  pagellm::InitLogging(absl::GetFlag(FLAGS_log_level).c_str());
  if (absl::Status s = pagellm::InstallTerminationSignals(); !s.ok()) return Fail(s);

  absl::StatusOr<std::unique_ptr<pagellm::WorkerServer>> server = StartFromFlags();
  if (!server.ok()) return Fail(server.status());
  std::printf("pagellm-worker listening on %s:%d (metrics :%d)\n",
              absl::GetFlag(FLAGS_host).c_str(), (*server)->port(), (*server)->metrics_port());
  std::fflush(stdout);

  const int sig = pagellm::WaitForTerminationSignal();
  PLOG_INFO("{} received: draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Shutdown(absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace)));
  PLOG_INFO("stopped");
  return 0;
}
