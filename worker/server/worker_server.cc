// Start-up order: engine, metrics, engine thread, service, gRPC server, then SERVING. Shutdown
// runs the other way: NOT_SERVING and drain, wait for the active requests (up to the grace),
// stop the engine thread (cancelling the rest: every stream ends), then stop the gRPC server.
#include "worker/server/worker_server.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/api/model_fingerprint.h"
#include "common/api/proto_convert.h"
#include "common/logging.h"
#include "common/metrics_exposer.h"
#include "common/sampling/sampling_params.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "grpc/grpc.h"  // GRPC_ARG_ALLOW_REUSEPORT
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "worker/server/vllm_metrics.h"
#include "worker/server/worker_service.h"

namespace pagellm {

absl::StatusOr<std::unique_ptr<WorkerServer>> WorkerServer::Start(
    Options options, std::unique_ptr<Backend> backend, std::unique_ptr<Tokenizer> tokenizer) {
  std::unique_ptr<WorkerServer> w(new WorkerServer());
  w->backend_ = std::move(backend);
  w->tokenizer_ = std::move(tokenizer);
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(w->backend_.get(), w->tokenizer_.get(), options.engine));
  w->max_model_len_ = engine->max_model_len();

  w->metrics_ = std::make_unique<WorkerMetrics>(w->max_model_len_);
  if (!options.metrics_address.empty()) {
    std::vector<std::shared_ptr<const prometheus::Collectable>> sources = {w->metrics_->registry()};
    if (options.vllm_metrics) {
      sources.push_back(
          std::make_shared<VllmMetricsView>(w->metrics_->registry(), options.model_name));
    }
    ASSIGN_OR_RETURN(MetricsEndpoint endpoint,
                     ServeMetrics(options.metrics_address, std::move(sources)));
    w->metrics_endpoint_ = std::make_unique<MetricsEndpoint>(std::move(endpoint));
  }
  EngineLoop::Options lo;
  lo.block_size = w->backend_->block_size();
  lo.metrics = w->metrics_.get();
  lo.clock = std::move(options.clock);
  w->loop_ = EngineLoop::Start(std::move(engine), std::move(lo));

  v1::ModelInfo info;
  info.set_model_name(options.model_name);
  info.set_vocab_size(w->backend_->config().vocab_size);
  info.set_max_model_len(static_cast<int32_t>(w->max_model_len_));
  info.set_block_size(static_cast<int32_t>(w->backend_->block_size()));
  for (int32_t id : w->tokenizer_->end_of_generation_ids()) info.add_eos_token_ids(id);
  info.set_chat_template(SanitizeUtf8(options.chat_template));
  {
    // Token texts from a model file may be any bytes; proto strings must be UTF-8.
    v1::SpecialTokens* tokens = info.mutable_special_tokens();
    tokens->set_bos_token(SanitizeUtf8(options.chat_tokens.bos));
    tokens->set_eos_token(SanitizeUtf8(options.chat_tokens.eos));
    tokens->set_unk_token(SanitizeUtf8(options.chat_tokens.unk));
    tokens->set_pad_token(SanitizeUtf8(options.chat_tokens.pad));
  }
  for (const std::string& adapter : w->loop_->served_adapters()) {
    info.add_lora_adapters(adapter);
    w->metrics_->lora_requests->Add({{"adapter", adapter}});  // 0 from the start
  }
  *info.mutable_default_sampling() = options.default_sampling;
  info.set_max_tokens_limit(options.max_tokens_limit);
  info.set_max_parallel_samples(
      static_cast<int32_t>(std::min<int64_t>(kMaxParallelSamples, options.engine.max_num_seqs)));
  v1::TokenizerSpec spec;
  VocabSpecToProto(w->tokenizer_->spec(), &spec);
  info.set_model_fingerprint(ModelFingerprint(info, spec));
  SecretSet token;
  if (!options.worker_token.empty()) {
    absl::StatusOr<SecretSet> t = SecretSet::FromList({options.worker_token});
    if (!t.ok())
      return absl::InvalidArgumentError(absl::StrCat("--worker-token: ", t.status().message()));
    token = *std::move(t);
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  absl::StatusOr<std::unique_ptr<RuntimeLora>> lora =
      RuntimeLora::Create(w->loop_.get(), std::move(options.lora));
  if (!lora.ok()) {
    w->loop_->Stop();
    return lora.status();
  }
  w->lora_ = *std::move(lora);
  WorkerServer* self = w.get();
  w->service_ = std::make_unique<WorkerService>(
      w->loop_.get(), w->tokenizer_.get(), info, [self] { return self->backend_->health(); },
      [self] {
        if (self->server_ != nullptr)
          self->server_->GetHealthCheckService()->SetServingStatus(false);
      },
      std::move(token), w->lora_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, *credentials, &w->port_);
  // gRPC sets SO_REUSEPORT by default: a second server on a port in use would start and take
  // half of its connections. A port in use is an error at start instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(w->service_.get());
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  w->server_ = builder.BuildAndStart();
  if (w->server_ == nullptr || w->port_ == 0) {
    w->loop_->Stop();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen_address));
  }
  w->server_->GetHealthCheckService()->SetServingStatus(true);
  {
    absl::MutexLock lock(&w->mu_);
    w->serving_ = true;
  }
  PLOG_INFO("pagellm-worker: {} backend, {} KV blocks of {} tokens, listening on port {}{}",
            w->backend_->name(), w->backend_->num_kv_blocks(), w->backend_->block_size(), w->port_,
            w->metrics_endpoint_ != nullptr
                ? absl::StrCat(", metrics on port ", w->metrics_endpoint_->port)
                : "");
  return w;
}

WorkerServer::~WorkerServer() { Shutdown(absl::ZeroDuration()); }

int WorkerServer::metrics_port() const {
  return metrics_endpoint_ != nullptr ? metrics_endpoint_->port : 0;
}

bool WorkerServer::serving() const {
  absl::MutexLock lock(&mu_);
  return serving_;
}

void WorkerServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      // Another caller is draining (or has drained): wait until it is over.
      mu_.Await(absl::Condition(&shut_down_));
      return;
    }
    shutting_down_ = true;
    serving_ = false;
  }
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(false);
    loop_->SetDraining();
    const int64_t active = loop_->load().active;
    if (grace > absl::ZeroDuration() && active > 0) {
      PLOG_INFO("draining: refusing new requests, waiting up to {}s for {} active",
                absl::ToDoubleSeconds(grace), active);
      if (!loop_->WaitUntilIdle(absl::ToDoubleSeconds(grace))) {
        PLOG_WARN("grace period over: cancelling {} active requests", loop_->load().active);
      }
    }
  }
  if (loop_ != nullptr) loop_->Stop();  // cancels whatever is left: every stream finishes
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  }
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
}

}  // namespace pagellm
