// pagellm-router: the public pagellm.v1.Generation endpoint in front of pagellm-worker
// processes. Needs no weights: the model's description comes from a worker.
//
//   pagellm-router --workers 10.0.0.5:50052,10.0.0.6:50052
//   pagellm-router --worker-dns pagellm-worker-headless:50052 --port 50051 --metrics-port 9401
//   pagellm-router --workers 127.0.0.1:50061 --http-port 8000    (OpenAI API: /v1/completions)
//
// SIGTERM / SIGINT: NOT_SERVING, refuse new requests, let open streams finish for up to
// --shutdown-grace seconds, exit 0.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/auth/grpc_tls.h"
#include "common/auth/secret_set.h"
#include "common/flags_util.h"
#include "common/logging.h"
#include "common/signal_wait.h"
#include "router/http/access_log.h"
#include "router/http/reasoning.h"
#include "router/http/tool_calls.h"
#include "router/router_server.h"

ABSL_FLAG(std::string, host, "127.0.0.1",
          "Address to listen on (all ports); 0.0.0.0 for every interface");
ABSL_FLAG(int, port, 50051, "gRPC port (pagellm.v1.Generation, health, reflection)");
ABSL_FLAG(int, http_port, 8000,
          "HTTP port of the OpenAI-compatible API (/v1/completions, /v1/chat/completions, "
          "/v1/models, /health, /version); 0 turns it off");
ABSL_FLAG(int, http_threads, 2, "Threads serving HTTP connections");
ABSL_FLAG(bool, disable_access_log, false,
          "Log no line per HTTP request (client, request line, status, bytes, time; never a body)");
ABSL_FLAG(int, http_max_connections, 4096, "Open HTTP connections; more are closed at accept");
ABSL_FLAG(int64_t, max_request_body, 8 << 20,
          "Largest HTTP request body in bytes; larger ones get 413");
ABSL_FLAG(std::string, served_model_name, "",
          "The model name of the OpenAI API (`model` in requests, /v1/models); default: the "
          "workers' model name");
ABSL_FLAG(std::string, tool_call_parser, "",
          "How chat replies are read for tool calls under tool_choice \"auto\" (the default "
          "when a request gives tools): \"hermes\" (<tool_call>{...}</tool_call>: Qwen2.5, "
          "Hermes 2/3, ...), \"llama3_json\" (Llama 3.1-3.3's {\"name\", \"parameters\"}) or "
          "\"mistral\" ([TOOL_CALLS]); "
          "vLLM's --enable-auto-tool-choice --tool-call-parser NAME. Empty: \"auto\" is "
          "refused; named and \"required\" tool choices work either way");
ABSL_FLAG(std::string, reasoning_parser, "",
          "Splits a reasoning model's chat replies into `reasoning` (the <think> part) and "
          "`content`: \"deepseek_r1\" (DeepSeek-R1 and distills, QwQ, Qwen3 thinking-2507: "
          "reasoning until </think>) or \"qwen3\" (the same, unless the request's "
          "chat_template_kwargs set enable_thinking to false); vLLM's --reasoning-parser. "
          "Empty: replies are not split");
ABSL_FLAG(int, metrics_port, 9401, "Prometheus /metrics port; 0 turns metrics serving off");
ABSL_FLAG(std::string, workers, "", "Comma-separated worker addresses host:port");
ABSL_FLAG(std::string, worker_dns, "",
          "name:port resolved every --dns-interval seconds; each address is a worker "
          "(e.g. a Kubernetes headless service)");
ABSL_FLAG(double, dns_interval, 5.0, "Seconds between DNS resolutions of --worker-dns");
ABSL_FLAG(std::string, routing_policy, "prefix-aware",
          "prefix-aware: send a request to the worker holding the longest cached prefix of its "
          "prompt (ties: the most free KV blocks; lopsided load: the least loaded worker); "
          "most-free-blocks: ignore caches");
ABSL_FLAG(int64_t, routing_balance_abs, 8,
          "prefix-aware routing gives way to load when the preferred worker has this many more "
          "requests than the least loaded one ...");
ABSL_FLAG(double, routing_balance_rel, 1.5, "... and more than this many times as many");
ABSL_FLAG(std::string, scheduling_policy, "fcfs",
          "fcfs, or priority: waiting requests are placed by (priority, arrival), a smaller "
          "`priority` first (run the workers with the same flag)");
ABSL_FLAG(int, max_queue, 1024, "Requests that may wait for a worker; more are refused");
ABSL_FLAG(bool, allow_runtime_lora_updating, false,
          "serve /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's "
          "VLLM_ALLOW_RUNTIME_LORA_UPDATING), applied to every ready worker (each needs "
          "--allow-runtime-lora-updating --lora-dir)");
ABSL_FLAG(bool, resolve_lora_adapters, false,
          "with --allow-runtime-lora-updating: an OpenAI request naming a model that is neither "
          "served nor a served adapter first loads the adapter of that name from the directory "
          "of that name in the workers' --lora-dir (vLLM's lora_filesystem_resolver)");
ABSL_FLAG(double, request_timeout, 600.0,
          "Deadline in seconds for requests whose client sets none");
ABSL_FLAG(double, shutdown_grace, 30.0, "Seconds open streams get to finish after SIGTERM/SIGINT");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error");
// Security (README "Security").
ABSL_FLAG(std::string, api_key, "",
          "API keys clients must present (Authorization: Bearer KEY), comma-separated; also "
          "from $PAGELLM_API_KEY. Prefer --api-keys-file: flags show in process lists");
ABSL_FLAG(std::string, api_keys_file, "",
          "File of API keys, one per line ('#' comments); reloaded on SIGHUP");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain: serve gRPC and HTTP over TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, worker_token, "",
          "The token workers started with the same --worker-token require; also from "
          "--worker-token-file or $PAGELLM_WORKER_TOKEN (preferred: flags show in process lists)");
ABSL_FLAG(std::string, worker_token_file, "", "File holding --worker-token");
ABSL_FLAG(std::string, worker_tls_ca, "",
          "PEM CA bundle: reach workers over TLS, trusting only certificates it signed");
ABSL_FLAG(std::string, worker_tls_cert, "",
          "PEM client certificate for workers that require one (mutual TLS)");
ABSL_FLAG(std::string, worker_tls_key, "", "PEM private key of --worker-tls-cert");
ABSL_FLAG(std::string, worker_tls_server_name, "",
          "The name the workers' certificates carry, when not their address");

namespace {

// The API keys of the flags, the environment and the keys file, together.
absl::StatusOr<pagellm::SecretSet> LoadApiKeys() {
  std::vector<std::string> keys;
  for (absl::string_view k :
       absl::StrSplit(absl::GetFlag(FLAGS_api_key), ',', absl::SkipWhitespace())) {
    keys.emplace_back(absl::StripAsciiWhitespace(k));
  }
  if (const char* env = std::getenv("PAGELLM_API_KEY"); env != nullptr && *env != '\0') {
    keys.emplace_back(env);
  }
  absl::StatusOr<pagellm::SecretSet> set = pagellm::SecretSet::FromList(keys);
  if (!set.ok() || absl::GetFlag(FLAGS_api_keys_file).empty()) return set;
  absl::StatusOr<pagellm::SecretSet> file =
      pagellm::SecretSet::FromFile(absl::GetFlag(FLAGS_api_keys_file));
  if (!file.ok()) return file.status();
  set->Merge(*file);
  return set;
}

}  // namespace

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
  absl::StatusOr<pagellm::SecretSet> keys = LoadApiKeys();
  if (!keys.ok()) {
    PLOG_ERROR("API keys: {}", keys.status().ToString());
    return 2;
  }
  if (keys->empty()) {
    PLOG_WARN("no API key configured: anyone who reaches the router can use it");
  } else {
    PLOG_INFO("{} API key(s) configured", keys->size());
  }
  options.api_keys = std::make_shared<pagellm::ReloadableSecrets>();
  options.api_keys->Set(*std::move(keys));
  options.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), ""};
  options.http.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.http.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        pagellm::MakeChannelCredentials({absl::GetFlag(FLAGS_worker_tls_ca),
                                         absl::GetFlag(FLAGS_worker_tls_cert),
                                         absl::GetFlag(FLAGS_worker_tls_key), ""});
    if (!credentials.ok()) {
      PLOG_ERROR("{}", credentials.status().ToString());
      return 2;
    }
    options.workers.security.credentials = *std::move(credentials);
    options.workers.security.tls_server_name = absl::GetFlag(FLAGS_worker_tls_server_name);
    absl::StatusOr<std::string> token =
        pagellm::ReadSecret(absl::GetFlag(FLAGS_worker_token),
                            absl::GetFlag(FLAGS_worker_token_file), "PAGELLM_WORKER_TOKEN");
    if (!token.ok()) {
      PLOG_ERROR("{}", token.status().ToString());
      return 2;
    }
    options.workers.security.token = *std::move(token);
  }
  options.listen_address = absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  if (absl::GetFlag(FLAGS_metrics_port) != 0) {
    options.metrics_address =
        absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_metrics_port));
  }
  for (absl::string_view w :
       absl::StrSplit(absl::GetFlag(FLAGS_workers), ',', absl::SkipWhitespace())) {
    options.workers.addresses.emplace_back(w);
  }
  if (absl::GetFlag(FLAGS_http_port) < 0 || absl::GetFlag(FLAGS_http_port) > 65535) {
    std::fprintf(stderr, "--http-port must be in [0, 65535]\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_http_port) != 0) {
    options.http.host = absl::GetFlag(FLAGS_host);
    options.http.port = absl::GetFlag(FLAGS_http_port);
    options.http.threads = absl::GetFlag(FLAGS_http_threads);
    if (!absl::GetFlag(FLAGS_disable_access_log)) options.http.on_complete = pagellm::LogAccess;
    if (absl::GetFlag(FLAGS_http_max_connections) <= 0 ||
        absl::GetFlag(FLAGS_max_request_body) <= 0) {
      std::fprintf(stderr, "--http-max-connections and --max-request-body must be > 0\n");
      return 2;
    }
    options.http.max_connections = static_cast<size_t>(absl::GetFlag(FLAGS_http_max_connections));
    options.http.max_body_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_max_request_body));
    options.openai.served_model_name = absl::GetFlag(FLAGS_served_model_name);
    if (const std::string parser = absl::GetFlag(FLAGS_reasoning_parser); !parser.empty()) {
      options.openai.reasoning_format = pagellm::ReasoningFormatNamed(parser);
      if (!options.openai.reasoning_format.has_value()) {
        std::fprintf(stderr, "--reasoning-parser must be empty, deepseek_r1 or qwen3\n");
        return 2;
      }
    }
    if (const std::string parser = absl::GetFlag(FLAGS_tool_call_parser); !parser.empty()) {
      options.openai.tool_call_format = pagellm::ToolCallFormatNamed(parser);
      if (!options.openai.tool_call_format.has_value()) {
        std::fprintf(stderr, "--tool-call-parser must be empty, hermes, llama3_json or mistral\n");
        return 2;
      }
    }
  }
  if (const std::string policy = absl::GetFlag(FLAGS_routing_policy); policy == "prefix-aware") {
    options.workers.policy = pagellm::WorkerPool::Policy::kPrefixAware;
  } else if (policy == "most-free-blocks") {
    options.workers.policy = pagellm::WorkerPool::Policy::kMostFreeBlocks;
  } else {
    std::fprintf(stderr, "--routing-policy must be prefix-aware or most-free-blocks\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_routing_balance_abs) < 0 ||
      !(absl::GetFlag(FLAGS_routing_balance_rel) >= 1.0)) {
    std::fprintf(stderr, "--routing-balance-abs must be >= 0 and --routing-balance-rel >= 1\n");
    return 2;
  }
  options.workers.balance_abs = absl::GetFlag(FLAGS_routing_balance_abs);
  options.workers.balance_rel = absl::GetFlag(FLAGS_routing_balance_rel);
  options.workers.dns_target = absl::GetFlag(FLAGS_worker_dns);
  options.workers.dns_interval = absl::Seconds(absl::GetFlag(FLAGS_dns_interval));
  if (absl::GetFlag(FLAGS_max_queue) <= 0) {
    std::fprintf(stderr, "--max-queue must be > 0\n");
    return 2;
  }
  options.max_queue = static_cast<size_t>(absl::GetFlag(FLAGS_max_queue));
  options.allow_runtime_lora_updating = absl::GetFlag(FLAGS_allow_runtime_lora_updating);
  options.openai.load_adapters_on_demand = absl::GetFlag(FLAGS_resolve_lora_adapters);
  if (options.openai.load_adapters_on_demand && !options.allow_runtime_lora_updating) {
    std::fprintf(stderr, "--resolve-lora-adapters needs --allow-runtime-lora-updating\n");
    return 2;
  }
  if (const std::string policy = absl::GetFlag(FLAGS_scheduling_policy);
      policy == "fcfs" || policy == "priority") {
    options.priority_scheduling = policy == "priority";
  } else {
    std::fprintf(stderr, "--scheduling-policy must be fcfs or priority\n");
    return 2;
  }
  options.request_timeout = absl::GetFlag(FLAGS_request_timeout) > 0
                                ? absl::Seconds(absl::GetFlag(FLAGS_request_timeout))
                                : absl::InfiniteDuration();

  const std::shared_ptr<pagellm::ReloadableSecrets> options_keys = options.api_keys;
  auto router = pagellm::RouterServer::Start(std::move(options));
  if (!router.ok()) {
    PLOG_ERROR("{}", router.status().ToString());
    return 1;
  }
  pagellm::InstallReloadSignal();
  int sig;
  while ((sig = pagellm::WaitForTerminationSignal()) == SIGHUP) {
    absl::StatusOr<pagellm::SecretSet> reloaded = LoadApiKeys();
    if (!reloaded.ok()) {
      PLOG_ERROR("SIGHUP: keeping the current API keys: {}", reloaded.status().ToString());
      continue;
    }
    PLOG_INFO("SIGHUP: {} API key(s) now", reloaded->size());
    options_keys->Set(*std::move(reloaded));
  }
  PLOG_INFO("{} received: draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*router)->Shutdown(absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace)));
  PLOG_INFO("pagellm-router stopped");
  return 0;
}
