// One FakeStream per Generate call. Lock order: Impl::mu_ before FakeStream::mu_ (the ticker
// holds the first while it ticks the streams); a stream never takes Impl::mu_ while holding its
// own. Finish is called outside both locks, last: OnDone (which deletes the stream) may follow
// at once on another thread.
#include "router/testing/fake_worker.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/api/proto_convert.h"
#include "common/tokenizer/byte_level.h"
#include "pagellm/v1/worker.grpc.pb.h"

namespace pagellm::testing {

class FakeStream;

class FakeWorker::Impl {
 public:
  explicit Impl(Options options) : options_(std::move(options)) {}
  ~Impl();

  void Serve(const std::string& address);
  void Kill();

  const Options options_;
  int port_ = 0;

  mutable absl::Mutex mu_;
  v1::WorkerLoad load_ ABSL_GUARDED_BY(mu_);
  bool get_load_fails_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status generate_error_ ABSL_GUARDED_BY(mu_);
  bool stall_ ABSL_GUARDED_BY(mu_) = false;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  int cancellations_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<FakeStream*> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::WorkerGenerateRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> completed_{0};
  std::atomic<int64_t> tokens_sent_{0};

  absl::Mutex server_mu_;  // serializes Kill/Restart
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(server_mu_);
  std::unique_ptr<v1::Worker::CallbackService> service_ ABSL_GUARDED_BY(server_mu_);
  absl::Notification stop_;
  std::thread ticker_;
};

// Streams `total` tokens: one message per token, one delta per sample.
class FakeStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  FakeStream(FakeWorker::Impl* w, const v1::WorkerGenerateRequest& req, bool stall)
      : w_(w),
        request_id_(req.request_id()),
        prompt_len_(req.prompt_token_ids_size()),
        n_(req.sampling().has_n() && req.sampling().n() > 0 ? req.sampling().n() : 1),
        stall_(stall) {
    total_ = w->options_.tokens_per_request > 0 ? w->options_.tokens_per_request
             : req.sampling().has_max_tokens()  ? req.sampling().max_tokens()
                                                : 16;
  }

  // Starts writing when tokens go as fast as the stream allows.
  void Begin() {
    absl::MutexLock lock(&mu_);
    if (!stall_ && w_->options_.token_interval == absl::ZeroDuration()) WriteNextLocked();
  }

  // The ticker's step: one token if the stream is idle.
  void Tick() {
    absl::MutexLock lock(&mu_);
    if (!stall_ && !writing_ && !done_) WriteNextLocked();
  }

  void OnWriteDone(bool ok) override {
    bool finish = false;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok || cancelled_) {
        finish = !done_;
        done_ = true;
        status = grpc::Status::CANCELLED;
      } else {
        ++sent_;
        w_->tokens_sent_.fetch_add(1, std::memory_order_relaxed);
        if (sent_ == total_) {
          finish = true;
          done_ = true;
          w_->completed_.fetch_add(1);
        } else if (w_->options_.token_interval == absl::ZeroDuration()) {
          WriteNextLocked();
        }
      }
    }
    if (finish) Finish(status);
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&w_->mu_);
      ++w_->cancellations_;
    }
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      if (!writing_ && !done_) {
        done_ = true;
        finish = true;
      }
    }
    if (finish) Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&w_->mu_);
      w_->streams_.erase(this);
    }
    delete this;
  }

 private:
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (cancelled_ || done_) return;
    const int i = sent_;
    const bool last = i + 1 == total_;
    const int32_t id = 'a' + i % 26;
    msg_.Clear();
    msg_.set_request_id(request_id_);
    for (int s = 0; s < n_; ++s) {
      v1::SampleDelta* d = msg_.add_deltas();
      d->set_sample_index(s);
      d->add_token_ids(id);
      if (w_->options_.stamp_text) {
        d->set_text(std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
      } else {
        d->set_text(std::string(1, static_cast<char>(id)));
      }
      if (last) d->set_finish_reason(v1::FINISH_REASON_LENGTH);
    }
    if (last) {
      msg_.set_finished(true);
      msg_.mutable_usage()->set_prompt_tokens(prompt_len_);
      msg_.mutable_usage()->set_completion_tokens(total_ * n_);
    }
    writing_ = true;
    StartWrite(&msg_);
  }

  FakeWorker::Impl* const w_;
  const std::string request_id_;
  const int prompt_len_;
  const int n_;
  const bool stall_;
  int total_ = 16;

  absl::Mutex mu_;
  v1::GenerateResponse msg_ ABSL_GUARDED_BY(mu_);
  int sent_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // Finish called or decided
};

namespace {

class FakeService final : public v1::Worker::CallbackService {
 public:
  explicit FakeService(FakeWorker::Impl* w) : w_(w) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext*, const v1::WorkerGenerateRequest* request) override {
    grpc::Status error;
    bool stall;
    FakeStream* stream;
    {
      absl::MutexLock lock(&w_->mu_);
      ++w_->calls_;
      if (w_->options_.record_requests) w_->requests_.push_back(*request);
      error = w_->generate_error_;
      stall = w_->stall_;
      stream = new FakeStream(w_, *request, stall);
      if (error.ok()) w_->streams_.insert(stream);
    }
    if (!error.ok()) {
      stream->Finish(error);  // never registered: OnDone's erase is a no-op
      return stream;
    }
    stream->Begin();
    return stream;
  }

  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* context, const v1::GetLoadRequest*,
                                    v1::WorkerLoad* response) override {
    grpc::Status status;
    {
      absl::MutexLock lock(&w_->mu_);
      if (w_->get_load_fails_) {
        status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake worker: GetLoad fails");
      } else {
        *response = w_->load_;
      }
    }
    grpc::ServerUnaryReactor* r = context->DefaultReactor();
    r->Finish(status);
    return r;
  }

  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest*,
                                         v1::ModelInfo* response) override {
    *response = w_->options_.info;
    grpc::ServerUnaryReactor* r = context->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

  grpc::ServerUnaryReactor* GetTokenizer(grpc::CallbackServerContext* context,
                                         const v1::GetTokenizerRequest*,
                                         v1::TokenizerSpec* response) override {
    VocabSpecToProto(FakeWorker::TinyVocab(), response);
    grpc::ServerUnaryReactor* r = context->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

 private:
  FakeWorker::Impl* const w_;
};

}  // namespace

void FakeWorker::Impl::Serve(const std::string& address) {
  absl::MutexLock lock(&server_mu_);
  service_ = std::make_unique<FakeService>(this);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    std::fprintf(stderr, "FakeWorker: cannot listen on %s\n", address.c_str());
    std::abort();
  }
  port_ = port;
}

void FakeWorker::Impl::Kill() {
  absl::MutexLock lock(&server_mu_);
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
  service_.reset();
}

FakeWorker::Impl::~Impl() {
  stop_.Notify();
  if (ticker_.joinable()) ticker_.join();
  Kill();
}

VocabSpec FakeWorker::TinyVocab() {
  VocabSpec spec;
  spec.model = VocabModel::kByteLevelBpe;
  spec.pre = "gpt2";
  for (int b = 0; b < 256; ++b) spec.tokens.emplace_back(ByteLevelChar(static_cast<uint8_t>(b)));
  spec.token_types.assign(256, TokenType::kNormal);
  for (const char* special : {"<s>", "</s>", "<|im_start|>", "<|im_end|>"}) {
    spec.tokens.emplace_back(special);
    spec.token_types.push_back(TokenType::kControl);
  }
  spec.bos_id = 256;
  spec.eos_id = 257;
  spec.add_bos = true;
  return spec;
}

v1::ModelInfo FakeWorker::DefaultInfo() {
  v1::ModelInfo info;
  info.set_model_name("fake-model");
  info.set_vocab_size(260);
  info.set_max_model_len(64);
  info.set_block_size(4);
  info.add_eos_token_ids(257);
  info.set_max_parallel_samples(4);
  return info;
}

v1::WorkerLoad FakeWorker::DefaultLoad() {
  v1::WorkerLoad load;
  load.set_kv_blocks_total(1000);
  load.set_kv_blocks_free(1000);
  load.set_block_size(4);
  return load;
}

std::unique_ptr<FakeWorker> FakeWorker::Start(Options options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  {
    absl::MutexLock lock(&impl->mu_);
    impl->load_ = impl->options_.load;
  }
  impl->Serve(impl->options_.address);
  if (impl->options_.token_interval > absl::ZeroDuration()) {
    Impl* w = impl.get();
    impl->ticker_ = std::thread([w] {
      while (!w->stop_.WaitForNotificationWithTimeout(w->options_.token_interval)) {
        absl::MutexLock lock(&w->mu_);
        for (FakeStream* s : w->streams_) s->Tick();
      }
    });
  }
  return std::unique_ptr<FakeWorker>(new FakeWorker(std::move(impl)));
}

FakeWorker::FakeWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FakeWorker::~FakeWorker() = default;

std::string FakeWorker::address() const { return absl::StrCat("127.0.0.1:", impl_->port_); }

void FakeWorker::SetLoad(const v1::WorkerLoad& load) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->load_ = load;
}

void FakeWorker::SetGetLoadFails(bool fails) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->get_load_fails_ = fails;
}

void FakeWorker::SetGenerateError(const grpc::Status& status) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->generate_error_ = status;
}

void FakeWorker::SetStall(bool stall) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->stall_ = stall;
}

void FakeWorker::Kill() { impl_->Kill(); }

void FakeWorker::Restart() { impl_->Serve(address()); }

int FakeWorker::generate_calls() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->calls_;
}

int FakeWorker::cancellations() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->cancellations_;
}

int FakeWorker::completed() const { return impl_->completed_.load(); }

int FakeWorker::active_streams() const {
  absl::MutexLock lock(&impl_->mu_);
  return static_cast<int>(impl_->streams_.size());
}

int64_t FakeWorker::tokens_sent() const { return impl_->tokens_sent_.load(); }

std::vector<v1::WorkerGenerateRequest> FakeWorker::requests() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->requests_;
}

namespace {

bool AwaitCount(absl::Mutex& mu, const int& value, int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu);
  struct Arg {
    const int* value;
    int n;
  } arg{&value, n};
  return mu.AwaitWithTimeout(absl::Condition(
                                 +[](Arg* a) { return *a->value >= a->n; }, &arg),
                             timeout);
}

}  // namespace

bool FakeWorker::WaitForCancellations(int n, absl::Duration timeout) const {
  return AwaitCount(impl_->mu_, impl_->cancellations_, n, timeout);
}

bool FakeWorker::WaitForGenerateCalls(int n, absl::Duration timeout) const {
  return AwaitCount(impl_->mu_, impl_->calls_, n, timeout);
}

bool FakeWorker::WaitForActiveStreams(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&impl_->mu_);
  struct Arg {
    const std::set<FakeStream*>* streams;
    int n;
  } arg{&impl_->streams_, n};
  return impl_->mu_.AwaitWithTimeout(
      absl::Condition(
          +[](Arg* a) { return static_cast<int>(a->streams->size()) == a->n; }, &arg),
      timeout);
}

bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!cond()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

v1::WorkerLoad Load(int64_t free, int64_t total) {
  v1::WorkerLoad l = FakeWorker::DefaultLoad();
  l.set_kv_blocks_free(free);
  l.set_kv_blocks_total(total);
  return l;
}

}  // namespace pagellm::testing
