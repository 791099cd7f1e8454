// One FakeStream (a write reactor) per Generate call. A stream always has exactly one thing
// pending: a write, or a timer entry. So its steps never run concurrently, and Finish is called
// once, by whichever step finds the stream done, cancelled or broken. OnCancel only sets a flag
// that the next step reads. The timer thread takes Impl::timer_mu_ only, never a stream's state;
// streams call Impl under Impl::mu_ (stats) or timer_mu_ (scheduling), never both.
#include "tools/bench/testing/fake_stream_server.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "pagellm/v1/generation.grpc.pb.h"
#include "pagellm/v1/worker.grpc.pb.h"

namespace pagellm::bench::testing {

class FakeStream;

class FakeStreamServer::Impl {
 public:
  explicit Impl(Options options) : options_(std::move(options)) {}
  ~Impl();

  absl::Status Serve();

  // A new Generate call: records it and says whether it must fail.
  bool Arrive(v1::WorkerGenerateRequest request, bool router);
  void StreamOpened();
  void StreamClosed(int64_t tokens_sent);
  // Runs stream->Step() once `at` has come, on the timer thread.
  void RunAt(absl::Time at, FakeStream* stream);
  v1::ModelInfo ModelInfo() const;

  const Options options_;
  int port_ = 0;

  mutable absl::Mutex mu_;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  int64_t open_streams_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::WorkerGenerateRequest> requests_ ABSL_GUARDED_BY(mu_);

 private:
  void TimerLoop();

  absl::Mutex timer_mu_;
  absl::CondVar timer_cv_;
  std::multimap<absl::Time, FakeStream*> timers_ ABSL_GUARDED_BY(timer_mu_);
  bool stop_ ABSL_GUARDED_BY(timer_mu_) = false;
  std::thread timer_thread_;

  std::unique_ptr<grpc::Service> generation_;
  std::unique_ptr<grpc::Service> worker_;
  std::unique_ptr<grpc::Server> server_;
};

namespace {
int32_t TokensFor(const FakeStreamServer::Options& o, const v1::SamplingParams& s) {
  if (o.tokens_per_request > 0) return o.tokens_per_request;
  return s.has_max_tokens() ? s.max_tokens() : 16;
}
}  // namespace

class FakeStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Starts streaming `total` tokens, or ends the call at once with `failure`.
  FakeStream(FakeStreamServer::Impl* server, std::string request_id, int32_t total,
             std::optional<grpc::Status> failure = std::nullopt)
      : server_(server), request_id_(std::move(request_id)), total_(total) {
    if (failure.has_value()) {
      Finish(*failure);
      return;
    }
    server_->StreamOpened();
    opened_ = true;
    After(server_->options_.first_token_delay);
  }

  // Writes the next message: up to tokens_per_message tokens, or the final usage message.
  void Step() {
    if (cancelled_.load()) return Close(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    msg_.Clear();
    msg_.set_request_id(request_id_);
    if (sent_ == total_) {
      msg_.set_finished(true);
      msg_.mutable_usage()->set_completion_tokens(total_);
      final_written_ = true;
    } else {
      const int32_t n = std::min(server_->options_.tokens_per_message, total_ - sent_);
      v1::SampleDelta* d = msg_.add_deltas();
      for (int32_t i = 0; i < n; ++i) {
        d->add_token_ids(100 + (sent_ + i) % std::max(1, server_->options_.vocab_size - 100));
      }
      sent_ += n;
      d->set_text(std::string(n, 'x'));
      if (sent_ == total_) d->set_finish_reason(v1::FINISH_REASON_LENGTH);
    }
    StartWrite(&msg_);
  }

 private:
  void OnWriteDone(bool ok) override {
    if (!ok) return Close(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
    if (final_written_) return Close(grpc::Status::OK);
    if (sent_ == total_) return Step();  // the usage message follows the last token at once
    After(server_->options_.token_interval);
  }
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override { delete this; }

  void After(absl::Duration delay) {
    if (delay <= absl::ZeroDuration()) return Step();
    server_->RunAt(absl::Now() + delay, this);
  }
  // Closes before Finish, so the server never counts more open streams than the client does.
  void Close(const grpc::Status& status) {
    if (opened_) server_->StreamClosed(sent_);
    Finish(status);
  }

  FakeStreamServer::Impl* const server_;
  const std::string request_id_;
  const int32_t total_;
  bool opened_ = false;
  int32_t sent_ = 0;
  bool final_written_ = false;
  std::atomic<bool> cancelled_{false};
  v1::GenerateResponse msg_;  // being written
};

namespace {

FakeStream* NewStream(FakeStreamServer::Impl* server, const std::string& request_id,
                      const v1::SamplingParams& sampling, bool fail) {
  if (fail) {
    return new FakeStream(server, request_id, 0,
                          grpc::Status(server->options_.fail_code, "fake failure"));
  }
  return new FakeStream(server, request_id, TokensFor(server->options_, sampling));
}

class GenerationService final : public v1::Generation::CallbackService {
 public:
  explicit GenerationService(FakeStreamServer::Impl* server) : server_(server) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext*, const v1::GenerateRequest* request) override {
    if (!request->has_token_ids()) {  // the bench must send token ids
      return new FakeStream(server_, request->request_id(), 0,
                            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "want token_ids"));
    }
    v1::WorkerGenerateRequest w;
    w.set_request_id(request->request_id());
    *w.mutable_prompt_token_ids() = request->token_ids().ids();
    *w.mutable_sampling() = request->sampling();
    return NewStream(server_, request->request_id(), request->sampling(),
                     server_->Arrive(std::move(w), /*router=*/true));
  }
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest*,
                                         v1::ModelInfo* response) override {
    *response = server_->ModelInfo();
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  FakeStreamServer::Impl* const server_;
};

class WorkerService final : public v1::Worker::CallbackService {
 public:
  explicit WorkerService(FakeStreamServer::Impl* server) : server_(server) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext*, const v1::WorkerGenerateRequest* request) override {
    return NewStream(server_, request->request_id(), request->sampling(),
                     server_->Arrive(*request, /*router=*/false));
  }
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest*,
                                         v1::ModelInfo* response) override {
    *response = server_->ModelInfo();
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  FakeStreamServer::Impl* const server_;
};

}  // namespace

absl::Status FakeStreamServer::Impl::Serve() {
  timer_thread_ = std::thread([this] { TimerLoop(); });
  generation_ = std::make_unique<GenerationService>(this);
  worker_ = std::make_unique<WorkerService>(this);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(generation_.get());
  builder.RegisterService(worker_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) return absl::InternalError("fake server did not start");
  return absl::OkStatus();
}

FakeStreamServer::Impl::~Impl() {
  // Shutdown cancels the calls and waits for every reactor's OnDone; streams waiting on a timer
  // need the timer thread until then.
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
  {
    absl::MutexLock lock(&timer_mu_);
    stop_ = true;
    timer_cv_.Signal();
  }
  if (timer_thread_.joinable()) timer_thread_.join();
}

bool FakeStreamServer::Impl::Arrive(v1::WorkerGenerateRequest request, bool router) {
  absl::MutexLock lock(&mu_);
  requests_.push_back(std::move(request));
  ++(router ? stats_.router_calls : stats_.worker_calls);
  const int64_t n = stats_.router_calls + stats_.worker_calls;
  const bool fail = options_.fail_every > 0 && n % options_.fail_every == 0;
  if (fail) ++stats_.failed_calls;
  return fail;
}

void FakeStreamServer::Impl::StreamOpened() {
  absl::MutexLock lock(&mu_);
  stats_.max_concurrent_streams = std::max(stats_.max_concurrent_streams, ++open_streams_);
}

void FakeStreamServer::Impl::StreamClosed(int64_t tokens_sent) {
  absl::MutexLock lock(&mu_);
  --open_streams_;
  stats_.tokens_sent += tokens_sent;
}

void FakeStreamServer::Impl::RunAt(absl::Time at, FakeStream* stream) {
  absl::MutexLock lock(&timer_mu_);
  timers_.emplace(at, stream);
  timer_cv_.Signal();
}

void FakeStreamServer::Impl::TimerLoop() {
  absl::MutexLock lock(&timer_mu_);
  while (!stop_) {
    if (timers_.empty()) {
      timer_cv_.Wait(&timer_mu_);
      continue;
    }
    const auto first = timers_.begin();
    if (first->first > absl::Now()) {
      timer_cv_.WaitWithDeadline(&timer_mu_, first->first);
      continue;
    }
    FakeStream* stream = first->second;
    timers_.erase(first);
    timer_mu_.Unlock();
    stream->Step();  // may re-enter RunAt only after its write completes, on another thread
    timer_mu_.Lock();
  }
}

v1::ModelInfo FakeStreamServer::Impl::ModelInfo() const {
  v1::ModelInfo info;
  info.set_model_name("fake");
  info.set_vocab_size(options_.vocab_size);
  info.set_max_model_len(options_.max_model_len);
  info.set_block_size(16);
  info.add_eos_token_ids(2);
  info.set_max_parallel_samples(1);
  return info;
}

absl::StatusOr<std::unique_ptr<FakeStreamServer>> FakeStreamServer::Start(Options options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Serve(); !s.ok()) return s;
  return std::unique_ptr<FakeStreamServer>(new FakeStreamServer(std::move(impl)));
}

FakeStreamServer::FakeStreamServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FakeStreamServer::~FakeStreamServer() = default;

std::string FakeStreamServer::address() const { return absl::StrCat("127.0.0.1:", impl_->port_); }

std::shared_ptr<grpc::Channel> FakeStreamServer::NewChannel() const {
  return grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
}

FakeStreamServer::Stats FakeStreamServer::stats() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->stats_;
}

std::vector<v1::WorkerGenerateRequest> FakeStreamServer::requests() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->requests_;
}

}  // namespace pagellm::bench::testing
