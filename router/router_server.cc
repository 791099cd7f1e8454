// Start-up order: metrics, queue, pool, service, gRPC server; only then are pool changes wired
// to the queue and the health status (wired_), and the threads started. Shutdown runs the
// other way: drain, stop the server (all reactors done), stop the threads, then destroy.
#include "router/router_server.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/api/proto_convert.h"
#include "common/logging.h"
#include "grpc/grpc.h"  // GRPC_ARG_ALLOW_REUSEPORT
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "router/http/openai_response.h"
#include "router/lora_fanout.h"
#include "router/model_context.h"

namespace pagellm {

absl::StatusOr<std::unique_ptr<RouterServer>> RouterServer::Start(Options options) {
  std::unique_ptr<RouterServer> r(new RouterServer(std::move(options)));
  const Options& o = r->options_;
  if (o.max_queue == 0) return absl::InvalidArgumentError("--max-queue must be > 0");

  absl::StatusOr<std::unique_ptr<RouterMetrics>> metrics = RouterMetrics::Create(o.metrics_address);
  if (!metrics.ok()) return metrics.status();
  r->metrics_ = *std::move(metrics);
  r->queue_ =
      std::make_unique<AdmissionQueue>(AdmissionQueue::Options{o.max_queue, o.priority_scheduling});
  RouterServer* self = r.get();
  WorkerPool::Options pool_options = o.workers;
  pool_options.replay_runtime_adapters = o.allow_runtime_lora_updating;
  absl::StatusOr<std::unique_ptr<WorkerPool>> pool =
      WorkerPool::Create(std::move(pool_options), [self] { self->OnPoolChange(); });
  if (!pool.ok()) return pool.status();
  r->pool_ = *std::move(pool);
  r->service_ = std::make_unique<GenerationService>(
      r->queue_.get(), r->pool_.get(), r->metrics_.get(), o.request_timeout, o.api_keys.get());
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials(o.tls);
  if (!credentials.ok()) return credentials.status();

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(o.listen_address, *credentials, &r->port_);
  // gRPC sets SO_REUSEPORT by default: a second server on a port in use would start and take
  // half of its connections. A port in use is an error at start instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(r->service_.get());
  r->server_ = builder.BuildAndStart();
  if (r->server_ == nullptr || r->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", o.listen_address));
  }
  {
    absl::MutexLock lock(&r->health_mu_);
    r->health_ready_ = true;
  }
  if (o.http.port >= 0) {
    // HTTP requests open the gRPC method's streams in-process: one pipeline for both APIs.
    OpenAiFrontend::Deps deps;
    GenerationService* service = r->service_.get();
    deps.open = [service](const v1::GenerateRequest& request, absl::Time deadline,
                          RoutedStream::Client* client) {
      return service->Open(request, deadline, client);
    };
    deps.model = [service] { return std::shared_ptr<const ModelContext>(service->model()); };
    deps.serving = [self] { return self->serving(); };
    ReloadableSecrets* keys = o.api_keys.get();
    deps.authorized = [keys](std::string_view authorization) {
      return keys == nullptr || keys->Allows(SecretSet::BearerToken(authorization));
    };
    WorkerPool* pool = r->pool_.get();
    deps.adapters = [pool] { return pool->ServedAdapters(); };
    if (o.allow_runtime_lora_updating) {
      deps.change_adapters = [self, timeout = o.lora_change_timeout](
                                 const LoraChangeRequest& change,
                                 std::function<void(absl::Status)> done) {
        {
          absl::MutexLock lock(&self->wire_mu_);
          if (!self->wired_) return done(absl::UnavailableError("the router is shutting down"));
          ++self->pool_callbacks_;  // Shutdown waits for the workers' answers
        }
        ChangeWorkerAdapters(self->pool_.get(), change, timeout,
                             [self, done = std::move(done)](absl::Status st) {
                               done(std::move(st));
                               absl::MutexLock lock(&self->wire_mu_);
                               --self->pool_callbacks_;
                             });
      };
    }
    OpenAiFrontend::Options openai = o.openai;
    if (openai.version.empty()) openai.version = PAGELLM_VERSION;
    r->openai_ = std::make_unique<OpenAiFrontend>(std::move(openai), std::move(deps));
    HttpServer::Options http = o.http;
    http.error_body = [](int status, std::string_view message) {
      return OpenAiErrorBody(status, message, "", "");
    };
    absl::StatusOr<std::unique_ptr<HttpServer>> server =
        HttpServer::Start(std::move(http), r->openai_.get());
    if (!server.ok()) return server.status();
    r->http_ = *std::move(server);
  }
  {
    absl::MutexLock lock(&r->wire_mu_);
    r->wired_ = true;
  }
  r->UpdateHealth();  // NOT_SERVING until a worker is ready and the model is known
  r->ticker_ = std::thread([self] { self->TickerLoop(); });
  r->bootstrap_ = std::thread([self] { self->BootstrapLoop(); });
  PLOG_INFO(
      "pagellm-router listening on port {}{}{}", r->port_,
      r->http_ != nullptr ? absl::StrCat(", HTTP (OpenAI API) on port ", r->http_->port()) : "",
      r->metrics_->port() ? absl::StrCat(", metrics on port ", r->metrics_->port()) : "");
  return r;
}

RouterServer::RouterServer(Options options) : options_(std::move(options)) {}

RouterServer::~RouterServer() { Shutdown(absl::ZeroDuration()); }

void RouterServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shutting_down_) {
      // Another caller is draining (or has drained): wait until it is over.
      shutdown_mu_.Await(absl::Condition(&shut_down_));
      return;
    }
    shutting_down_ = true;
  }
  if (server_ != nullptr) {
    draining_.store(true, std::memory_order_release);
    service_->StartDraining();
    UpdateHealth();
    if (grace > absl::ZeroDuration() && service_->open_streams() > 0) {
      PLOG_INFO("draining: waiting up to {}s for {} open streams", absl::ToDoubleSeconds(grace),
                service_->open_streams());
      if (!service_->WaitForStreams(absl::Now() + grace)) {
        PLOG_WARN("grace period over: cancelling {} open streams", service_->open_streams());
      }
    }
    // Cancels whatever is still open; returns when every reactor is done.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  }
  if (http_ != nullptr) {
    // Every HTTP request's calls end with the server's; give their last bytes a moment.
    openai_->WaitForRequests(absl::Now() + absl::Seconds(1));
    http_->Stop();
    // Stop cancelled what was left; a request's streams are destroyed after its count drops,
    // on the worker calls' threads. None may outlive the queue, pool and metrics they use.
    while (!service_->WaitForStreams(absl::Now() + absl::Seconds(5))) {
      PLOG_WARN("waiting for {} streams of the HTTP API to end", service_->open_streams());
    }
  }
  {
    absl::MutexLock lock(&wire_mu_);
    wired_ = false;
    wire_mu_.Await(absl::Condition(
        +[](int* callbacks) { return *callbacks == 0; }, &pool_callbacks_));
  }
  stop_.Notify();
  {
    absl::MutexLock lock(&fetch_mu_);
    if (fetch_context_ != nullptr) fetch_context_->TryCancel();
  }
  if (ticker_.joinable()) ticker_.join();
  if (bootstrap_.joinable()) bootstrap_.join();
  absl::MutexLock lock(&shutdown_mu_);
  shut_down_ = true;
}

bool RouterServer::serving() const {
  absl::MutexLock lock(&health_mu_);
  return serving_;
}

void RouterServer::OnPoolChange() {
  {
    absl::MutexLock lock(&wire_mu_);
    if (!wired_) return;
    ++pool_callbacks_;
  }
  queue_->Pump(*pool_);
  UpdateHealth();
  ReplayAdapters();
  absl::MutexLock lock(&wire_mu_);
  --pool_callbacks_;
}

void RouterServer::ReplayAdapters() {
  for (WorkerPool::AdapterReplay& replay : pool_->TakeAdapterReplays()) {
    for (const v1::LoadLoraAdapterRequest& a : replay.adapters) {
      {
        absl::MutexLock lock(&wire_mu_);
        if (!wired_) return;
        ++pool_callbacks_;  // Shutdown waits for the worker's answer
      }
      LoraChangeRequest change;
      change.load = true;
      change.lora_name = a.lora_name();
      change.lora_path = a.lora_path();
      ChangeAdaptersOn(
          pool_.get(), {replay.worker}, change, options_.lora_change_timeout,
          [this, address = replay.worker->address(), name = a.lora_name()](absl::Status st) {
            if (!st.ok()) {
              PLOG_WARN("worker {} did not load LoRA adapter {}, which the others serve: {}",
                        address, name, st.ToString());
            }
            absl::MutexLock lock(&wire_mu_);
            --pool_callbacks_;
          });
    }
  }
}

void RouterServer::UpdateHealth() {
  const WorkerPool::Stats stats = pool_->GetStats();
  metrics_->SetWorkersReady(stats.ready);
  metrics_->SetWorkersOtherModel(stats.mismatched);
  if (const std::shared_ptr<ModelContext> model = service_->model(); model != nullptr) {
    // Validate against what the ready workers accept now (a restarted one may accept less).
    model->SetLimits(stats.max_model_len, stats.max_parallel_samples);
  }
  const bool serving =
      stats.ready > 0 && service_->has_model() && !draining_.load(std::memory_order_acquire);
  absl::MutexLock lock(&health_mu_);
  if (!health_ready_ || (serving == serving_ && health_set_)) return;
  serving_ = serving;
  health_set_ = true;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus(serving);
  health->SetServingStatus(v1::Generation::service_full_name(), serving);
  PLOG_INFO("health: {}", serving ? "SERVING" : "NOT_SERVING");
}

void RouterServer::TickerLoop() {
  do {
    pool_->PollAll();
    queue_->Expire(absl::Now());
    queue_->Pump(*pool_);
    metrics_->SetQueueLength(static_cast<double>(queue_->size()));
  } while (!stop_.WaitForNotificationWithTimeout(options_.poll_interval));
}

// Fetches the model description from the first worker that answers, then keeps watching: when
// no worker serves that model any more and some serve another (every worker was restarted with
// a new model), the description is fetched again from one of those.
void RouterServer::BootstrapLoop() {
  absl::Status last;
  do {
    const WorkerPool::Stats stats = pool_->GetStats();
    const bool need = !service_->has_model() || (stats.ready == 0 && stats.mismatched > 0);
    if (!need) continue;
    for (const auto& worker : pool_->Endpoints()) {
      if (stop_.HasBeenNotified()) return;
      absl::Status s = FetchModel(*worker);
      if (s.ok()) {
        last = absl::OkStatus();
        UpdateHealth();
        break;
      }
      if (s.ToString() != last.ToString()) {
        PLOG_WARN("cannot fetch the model description from worker {} (retrying): {}",
                  worker->address(), s.ToString());
        last = s;
      }
    }
  } while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(500)));
}

absl::Status RouterServer::FetchModel(WorkerEndpoint& worker) {
  v1::ModelInfo info;
  v1::TokenizerSpec spec;
  for (int step = 0; step < 2; ++step) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(
        absl::Now() + (step == 0 ? absl::Seconds(5) : options_.model_fetch_timeout)));
    worker.Prepare(&context);
    {
      absl::MutexLock lock(&fetch_mu_);
      if (stop_.HasBeenNotified()) return absl::CancelledError("shutting down");
      fetch_context_ = &context;
    }
    grpc::Status s = step == 0 ? worker.stub().GetModelInfo(&context, {}, &info)
                               : worker.stub().GetTokenizer(&context, {}, &spec);
    {
      absl::MutexLock lock(&fetch_mu_);
      fetch_context_ = nullptr;
    }
    if (!s.ok()) return FromGrpcStatus(s);
  }
  absl::StatusOr<std::unique_ptr<ModelContext>> model = ModelContext::Create(info, spec);
  if (!model.ok()) return model.status();
  PLOG_INFO("model {} from worker {}: vocabulary {}, max_model_len {}, block_size {}{}{}",
            info.model_name(), worker.address(), (*model)->vocab_size(), info.max_model_len(),
            info.block_size(), (*model)->chat() != nullptr ? ", chat template" : "",
            service_->has_model() ? " (replacing the previous model: no worker serves it)" : "");
  if (!info.chat_template().empty() && (*model)->chat() == nullptr) {
    PLOG_WARN("chat prompts will be refused: {}", (*model)->chat_status().ToString());
  }
  // Workers that report another fingerprint are not used from their next poll on. (Workers older
  // than the fingerprint report none and are accepted.)
  pool_->SetModelFingerprint(info.model_fingerprint());
  service_->SetModel(*std::move(model));
  return absl::OkStatus();
}

}  // namespace pagellm
