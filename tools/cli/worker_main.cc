// pagellm-worker: serves one model on one device (the CPU by default) over the internal
// pagellm.v1.Worker gRPC service, with grpc.health.v1, server reflection and Prometheus metrics.
//
//   pagellm-worker --model models/SmolLM2-135M-Instruct.Q4_1.gguf [--port 50061]
//                  [--metrics-port 9400] [engine and model flags as pagellm generate]
//
// SIGTERM / SIGINT: health goes NOT_SERVING, new requests are refused (UNAVAILABLE), running ones
// may finish for --shutdown-grace seconds, then the process exits 0.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/sampling/sampling_params.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "prometheus/exposer.h"
#include "tools/cli/engine_flags.h"
#include "tools/cli/flags_util.h"
#include "tools/cli/model_flags.h"
#include "worker/backend/mock_backend.h"
#include "worker/server/engine_loop.h"
#include "worker/server/worker_metrics.h"
#include "worker/server/worker_service.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "address to listen on");
ABSL_FLAG(int32_t, port, 50061, "gRPC port (0: pick a free one and print it)");
ABSL_FLAG(int32_t, metrics_port, 9400, "Prometheus /metrics port (0: off)");
ABSL_FLAG(std::string, device, "cpu", "cpu | cuda");
ABSL_FLAG(std::string, dtype, "auto", "KV cache and activation dtype: auto | f32 | f16");
ABSL_FLAG(double, gpu_memory_utilization, 0.9,
          "fraction of GPU memory for weights and KV cache (--device cuda; on the CPU the KV "
          "budget is --kv-cache-memory)");
ABSL_FLAG(double, shutdown_grace, 30.0, "seconds running requests may finish after SIGTERM");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warn, error");
ABSL_FLAG(int64_t, mock_step_delay_us, 0,
          "--load-format mock: sleep this long per engine step to imitate compute");

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "pagellm-worker: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("pagellm-worker --model PATH [flags]");
  pagellm::cli::ParseFlags(argc, argv);
  pagellm::InitLogging(absl::GetFlag(FLAGS_log_level).c_str());
  if (absl::GetFlag(FLAGS_device) != "cpu") {
    return Fail(absl::UnimplementedError(absl::StrCat(
        "--device ", absl::GetFlag(FLAGS_device), ": only the CPU backend exists so far")));
  }

  const pagellm::LoadModelOptions lo = pagellm::cli::ModelOptionsFromFlags();
  std::unique_ptr<pagellm::Tokenizer> tokenizer;
  std::unique_ptr<pagellm::Backend> backend;
  std::string chat_template;
  if (lo.format == "mock") {
    // No model: the serving layers alone (see worker/backend/mock_backend.h).
    auto tok = pagellm::MockTokenizer();
    if (!tok.ok()) return Fail(tok.status());
    tokenizer = *std::move(tok);
    pagellm::MockBackendOptions mo;
    const pagellm::CpuBackendOptions flags = pagellm::cli::BackendOptionsFromFlags();
    mo.block_size = flags.block_size;
    if (flags.num_kv_blocks > 0) mo.num_kv_blocks = flags.num_kv_blocks;
    mo.max_batch_tokens = flags.max_batch_tokens;
    mo.step_delay_us = absl::GetFlag(FLAGS_mock_step_delay_us);
    auto b = pagellm::CreateMockBackend(mo);
    if (!b.ok()) return Fail(b.status());
    backend = *std::move(b);
  } else {
    if (lo.path.empty() && lo.format != "dummy") {
      return Fail(absl::InvalidArgumentError("--model is required"));
    }
    absl::StatusOr<pagellm::LoadedModel> loaded = pagellm::LoadModel(lo);
    if (!loaded.ok()) return Fail(loaded.status());
    pagellm::CpuBackendOptions bo = pagellm::cli::BackendOptionsFromFlags();
    if (absl::GetFlag(FLAGS_dtype) != "auto") bo.kv_cache_dtype = absl::GetFlag(FLAGS_dtype);
    tokenizer = std::move(loaded->tokenizer);
    chat_template = loaded->chat_template;
    auto b = pagellm::CreateCpuBackend(std::move(loaded->weights), bo);
    if (!b.ok()) return Fail(b.status());
    backend = *std::move(b);
  }
  absl::StatusOr<pagellm::EngineOptions> eo = pagellm::cli::EngineOptionsFromFlags();
  if (!eo.ok()) return Fail(eo.status());
  auto engine = pagellm::Engine::Create(backend.get(), tokenizer.get(), *eo);
  if (!engine.ok()) return Fail(engine.status());

  pagellm::v1::ModelInfo info;
  info.set_model_name(lo.path.empty() ? lo.format
                                      : std::filesystem::path(lo.path).filename().string());
  info.set_vocab_size(backend->config().vocab_size);
  info.set_max_model_len(static_cast<int32_t>((*engine)->max_model_len()));
  info.set_block_size(static_cast<int32_t>(backend->block_size()));
  for (int32_t id : tokenizer->end_of_generation_ids()) info.add_eos_token_ids(id);
  info.set_chat_template(chat_template);
  info.set_max_parallel_samples(static_cast<int32_t>(
      std::min<int64_t>(pagellm::kMaxParallelSamples, eo->max_num_seqs)));

  pagellm::WorkerMetrics metrics;
  std::unique_ptr<prometheus::Exposer> exposer;
  if (absl::GetFlag(FLAGS_metrics_port) > 0) {
    try {
      exposer = std::make_unique<prometheus::Exposer>(
          absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_metrics_port)));
    } catch (const std::exception& e) {
      return Fail(absl::UnavailableError(absl::StrCat("metrics port: ", e.what())));
    }
    exposer->RegisterCollectable(metrics.registry());
  }
  std::unique_ptr<pagellm::EngineLoop> loop =
      pagellm::EngineLoop::Start(*std::move(engine), backend->block_size(), &metrics);
  pagellm::WorkerService service(loop.get(), tokenizer.get(), info);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(
      absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port)),
      grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(64 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return Fail(absl::UnavailableError(absl::StrCat("cannot listen on port ",
                                                    absl::GetFlag(FLAGS_port))));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(true);
  std::printf("pagellm-worker listening on %s:%d (metrics :%d)\n",
              absl::GetFlag(FLAGS_host).c_str(), bound_port, absl::GetFlag(FLAGS_metrics_port));
  std::fflush(stdout);

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));

  PLOG_INFO("draining: refusing new requests, {} active", loop->load().active);
  health->SetServingStatus(false);
  loop->SetDraining();
  const auto grace_end = std::chrono::steady_clock::now() +
                         std::chrono::duration<double>(absl::GetFlag(FLAGS_shutdown_grace));
  while (loop->load().active > 0 && std::chrono::steady_clock::now() < grace_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  loop->Stop();  // cancels whatever is left
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  PLOG_INFO("stopped");
  return 0;
}
