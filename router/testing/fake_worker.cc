// One FakeStream per Generate call. A stream has at most one thing pending -- a write, or a
// timer entry -- and Finish is called once, by whichever step finds it done, cancelled or broken
// with nothing pending (OnCancel itself only when nothing is). Lock order: a stream's mu_ may be
// held while taking Impl::timer_mu_ (to schedule itself); the timer thread releases timer_mu_
// before stepping a stream; Impl::mu_ is never taken with a stream's mu_ held. Finish is called
// outside the stream's lock, last: OnDone (which deletes the stream) may follow at once.
#include "router/testing/fake_worker.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
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
#include "pagellm/v1/generation.grpc.pb.h"
#include "pagellm/v1/worker.grpc.pb.h"

namespace pagellm::testing {

class FakeStream;

class FakeWorker::Impl {
 public:
  explicit Impl(Options options) : options_(std::move(options)) {}
  ~Impl();

  void Serve(const std::string& address);
  void Kill();
  // A new Generate call (either service): records it and starts its stream, or fails it.
  grpc::ServerWriteReactor<v1::GenerateResponse>* Arrive(const v1::WorkerGenerateRequest& request);
  // Runs stream->Step() once `at` has come, on the timer thread.
  void RunAt(absl::Time at, FakeStream* stream);
  void StreamClosed();
  void StreamDone(FakeStream* stream);

  const Options options_;
  int port_ = 0;

  mutable absl::Mutex mu_;
  v1::WorkerLoad load_ ABSL_GUARDED_BY(mu_);
  v1::ModelInfo info_ ABSL_GUARDED_BY(mu_);
  bool get_load_fails_ ABSL_GUARDED_BY(mu_) = false;
  int get_load_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int prefix_filters_sent_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::Status generate_error_ ABSL_GUARDED_BY(mu_);
  bool stall_ ABSL_GUARDED_BY(mu_) = false;
  FakeWorker::Ending ending_ ABSL_GUARDED_BY(mu_) = FakeWorker::Ending::kNormal;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  int cancellations_ ABSL_GUARDED_BY(mu_) = 0;
  int open_ ABSL_GUARDED_BY(mu_) = 0;         // registered streams not yet finishing
  int max_streams_ ABSL_GUARDED_BY(mu_) = 0;  // the most open_ has been
  std::set<FakeStream*> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::WorkerGenerateRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> completed_{0};
  std::atomic<int64_t> tokens_sent_{0};

  absl::Mutex server_mu_;  // serializes Kill/Restart
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(server_mu_);
  std::unique_ptr<v1::Worker::CallbackService> worker_ ABSL_GUARDED_BY(server_mu_);
  std::unique_ptr<v1::Generation::CallbackService> generation_ ABSL_GUARDED_BY(server_mu_);

 private:
  void TimerLoop();

  absl::Mutex timer_mu_;
  absl::CondVar timer_cv_;
  std::multimap<absl::Time, FakeStream*> timers_ ABSL_GUARDED_BY(timer_mu_);
  bool stop_ ABSL_GUARDED_BY(timer_mu_) = false;
  std::thread timer_thread_{[this] { TimerLoop(); }};
};

// Streams `total` tokens, `tokens_per_message` per message, one delta per sample.
class FakeStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  using Ending = FakeWorker::Ending;

  FakeStream(FakeWorker::Impl* w, const v1::WorkerGenerateRequest& req, bool stall, Ending ending)
      : w_(w),
        request_id_(req.request_id()),
        prompt_len_(req.prompt_token_ids_size()),
        n_(req.sampling().beam_width() >= 2 ? req.sampling().beam_width()
           : req.sampling().n() > 0         ? req.sampling().n()
                                            : 1),
        stall_(stall),
        ending_(ending) {
    total_ = w->options_.tokens_per_request > 0 ? w->options_.tokens_per_request
             : req.sampling().has_max_tokens()  ? req.sampling().max_tokens()
                                                : 16;
    if (req.sampling().embed()) {  // one message: the embedding, no deltas
      total_ = 1;
      int64_t sum = 0;
      for (int32_t id : req.prompt_token_ids()) sum += id;
      embedding_ = {static_cast<float>(prompt_len_), static_cast<float>(sum), 0.5f};
    }
    // A resumed stream goes on after the tokens it had (the canned ones, by position). Samples
    // go in step here: those resumed unfinished have as many tokens; finished ones stay silent.
    int resumed = req.resumed_output_token_ids_size();
    for (const v1::ResumedSample& s : req.resumed_samples()) {
      finished_.push_back(s.finished());
      if (!s.finished()) resumed = s.token_ids_size();
    }
    sent_ = std::min(resumed, total_ - 1);
  }

  // Starts the stream (a stalled one waits for its cancellation).
  void Begin() {
    absl::MutexLock lock(&mu_);
    if (!stall_) AfterLocked(w_->options_.first_token_delay);
  }

  // The timer's step: the next message, or the end of a cancelled stream.
  void Step() {
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      scheduled_ = false;
      if (cancelled_ && !done_) {
        finish = done_ = true;
      } else if (!done_) {
        WriteNextLocked();
      }
    }
    if (finish) Close(grpc::Status::CANCELLED);
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
        sent_ += in_flight_;
        w_->tokens_sent_.fetch_add(in_flight_, std::memory_order_relaxed);
        if (aborted_ || (sent_ == total_ && ending_ != Ending::kNormal)) {
          finish = done_ = true;
          status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake: died");
        } else if (sent_ == total_) {
          finish = done_ = true;
          w_->completed_.fetch_add(1);
        } else {
          AfterLocked(w_->options_.token_interval);
        }
      }
    }
    if (finish) Close(status);
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
      if (!writing_ && !scheduled_ && !done_) finish = done_ = true;
    }
    if (finish) Close(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    w_->StreamDone(this);
    delete this;
  }

 private:
  // Ends the stream; it stops counting as open first, so the server never counts more open
  // streams than its clients do.
  void Close(const grpc::Status& status) {
    w_->StreamClosed();
    Finish(status);
  }

  void AfterLocked(absl::Duration delay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (delay <= absl::ZeroDuration()) return WriteNextLocked();
    scheduled_ = true;
    w_->RunAt(absl::Now() + delay, this);
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (cancelled_ || done_) return;
    msg_.Clear();
    msg_.set_request_id(request_id_);
    if (ending_ == Ending::kAbortMidway && sent_ >= total_ / 2 && embedding_.empty()) {
      for (int s = 0; s < n_; ++s) {
        if (s < std::ssize(finished_) && finished_[s]) continue;
        v1::SampleDelta* d = msg_.add_deltas();
        d->set_sample_index(s);
        d->set_finish_reason(v1::FINISH_REASON_ABORT);
      }
      aborted_ = true;
      in_flight_ = 0;
      writing_ = true;
      StartWrite(&msg_);
      return;
    }
    const int count = std::min(std::max(1, w_->options_.tokens_per_message), total_ - sent_);
    const bool last = sent_ + count == total_;
    msg_.mutable_embedding()->Add(embedding_.begin(), embedding_.end());
    for (int s = 0; s < n_ && embedding_.empty(); ++s) {
      if (s < std::ssize(finished_) && finished_[s]) continue;
      v1::SampleDelta* d = msg_.add_deltas();
      d->set_sample_index(s);
      std::string text;
      for (int i = sent_; i < sent_ + count; ++i) {
        const int32_t id = 'a' + i % 26;
        d->add_token_ids(id);
        text.push_back(static_cast<char>(id));
      }
      if (w_->options_.stamp_text) {
        d->set_text(std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
      } else {
        d->set_text(std::move(text));
      }
      if (last) d->set_finish_reason(v1::FINISH_REASON_LENGTH);
    }
    if (last && ending_ != Ending::kFailBeforeUsage) {
      msg_.set_finished(true);
      msg_.mutable_usage()->set_prompt_tokens(prompt_len_);
      msg_.mutable_usage()->set_completion_tokens(embedding_.empty() ? total_ * n_ : 0);
    }
    in_flight_ = count;
    writing_ = true;
    StartWrite(&msg_);
  }

  FakeWorker::Impl* const w_;
  const std::string request_id_;
  const int prompt_len_;
  const int n_;
  const bool stall_;
  const Ending ending_;
  int total_ = 16;
  std::vector<float> embedding_;  // an embedding request's: {prompt length, sum of ids, 0.5}
  std::vector<bool> finished_;    // a resumed request's samples that ended before

  absl::Mutex mu_;
  v1::GenerateResponse msg_ ABSL_GUARDED_BY(mu_);
  int sent_ ABSL_GUARDED_BY(mu_) = 0;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // tokens in the write under way
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool scheduled_ ABSL_GUARDED_BY(mu_) = false;  // a timer entry is pending
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;     // Finish called or decided
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;  // the ABORT message is written (kAbortMidway)
};

grpc::ServerWriteReactor<v1::GenerateResponse>* FakeWorker::Impl::Arrive(
    const v1::WorkerGenerateRequest& request) {
  grpc::Status error;
  FakeStream* stream;
  {
    absl::MutexLock lock(&mu_);
    ++calls_;
    if (options_.record_requests) requests_.push_back(request);
    error = generate_error_;
    if (error.ok() && options_.fail_every > 0 && calls_ % options_.fail_every == 0) {
      error = grpc::Status(options_.fail_code, "fake failure");
    }
    stream = new FakeStream(this, request, stall_, ending_);
    if (error.ok()) {
      streams_.insert(stream);
      max_streams_ = std::max(max_streams_, ++open_);
    }
  }
  if (!error.ok()) {
    stream->Finish(error);  // never registered: StreamDone's erase is a no-op
    return stream;
  }
  stream->Begin();
  return stream;
}

void FakeWorker::Impl::StreamClosed() {
  absl::MutexLock lock(&mu_);
  --open_;
}

void FakeWorker::Impl::StreamDone(FakeStream* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(stream);
}

void FakeWorker::Impl::RunAt(absl::Time at, FakeStream* stream) {
  absl::MutexLock lock(&timer_mu_);
  timers_.emplace(at, stream);
  timer_cv_.Signal();
}

void FakeWorker::Impl::TimerLoop() {
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
    stream->Step();
    timer_mu_.Lock();
  }
}

namespace {

grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const grpc::Status& status) {
  grpc::ServerUnaryReactor* r = context->DefaultReactor();
  r->Finish(status);
  return r;
}

class FakeService final : public v1::Worker::CallbackService {
 public:
  explicit FakeService(FakeWorker::Impl* w) : w_(w) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext*, const v1::WorkerGenerateRequest* request) override {
    return w_->Arrive(*request);
  }
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* context,
                                    const v1::GetLoadRequest* request,
                                    v1::WorkerLoad* response) override {
    grpc::Status status;
    {
      absl::MutexLock lock(&w_->mu_);
      if (w_->get_load_fails_) {
        status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake worker: GetLoad fails");
      } else {
        *response = w_->load_;
        // As a worker does: the adapters it serves now.
        *response->mutable_lora_adapters() = w_->info_.lora_adapters();
        ++w_->get_load_calls_;
        // As a worker does: the prefix filter only when the caller's copy is out of date.
        if (request->prefix_filter_version() == response->prefix_filter_version() &&
            request->prefix_filter_version() != 0) {
          response->clear_prefix_filter();
        } else if (!response->prefix_filter().empty()) {
          ++w_->prefix_filters_sent_;
        }
      }
    }
    return Reply(context, status);
  }

  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest*,
                                         v1::ModelInfo* response) override {
    {
      absl::MutexLock lock(&w_->mu_);
      *response = w_->info_;
    }
    return Reply(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* GetTokenizer(grpc::CallbackServerContext* context,
                                         const v1::GetTokenizerRequest*,
                                         v1::TokenizerSpec* response) override {
    VocabSpecToProto(FakeWorker::TinyVocab(), response);
    return Reply(context, grpc::Status::OK);
  }

  // Runtime LoRA updating as a worker with room for any number of adapters does it: the name
  // joins or leaves ModelInfo.lora_adapters; a path named "bad" is not an adapter, and one that
  // starts with "missing" is not in the worker's --lora-dir.
  grpc::ServerUnaryReactor* LoadLoraAdapter(grpc::CallbackServerContext* context,
                                            const v1::LoadLoraAdapterRequest* request,
                                            v1::LoraAdaptersResponse* response) override {
    grpc::Status status;
    absl::MutexLock lock(&w_->mu_);
    auto& names = *w_->info_.mutable_lora_adapters();
    if (std::find(names.begin(), names.end(), request->lora_name()) != names.end()) {
      status = grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "fake worker: already served");
    } else if (request->lora_path() == "bad") {
      status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "fake worker: not an adapter");
    } else if (request->lora_path().starts_with("missing")) {
      status = grpc::Status(grpc::StatusCode::NOT_FOUND, "fake worker: no such directory");
    } else {
      names.Add(std::string(request->lora_name()));
    }
    *response->mutable_lora_adapters() = names;
    return Reply(context, status);
  }

  grpc::ServerUnaryReactor* UnloadLoraAdapter(grpc::CallbackServerContext* context,
                                              const v1::UnloadLoraAdapterRequest* request,
                                              v1::LoraAdaptersResponse* response) override {
    grpc::Status status;
    absl::MutexLock lock(&w_->mu_);
    auto& names = *w_->info_.mutable_lora_adapters();
    auto it = std::find(names.begin(), names.end(), request->lora_name());
    if (it == names.end()) {
      status = grpc::Status(grpc::StatusCode::NOT_FOUND, "fake worker: not served");
    } else {
      names.erase(it);
    }
    *response->mutable_lora_adapters() = names;
    return Reply(context, status);
  }

 private:
  FakeWorker::Impl* const w_;
};

// The public API, as a router in front of this worker would answer it (token-id prompts only).
class FakeGeneration final : public v1::Generation::CallbackService {
 public:
  explicit FakeGeneration(FakeWorker::Impl* w) : w_(w) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override {
    if (!request->has_token_ids()) {
      auto* r = new Refusal();
      r->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "fake: want token_ids"));
      return r;
    }
    v1::WorkerGenerateRequest w;
    w.set_request_id(request->request_id());
    *w.mutable_prompt_token_ids() = request->token_ids().ids();
    *w.mutable_sampling() = request->sampling();
    return w_->Arrive(w);
  }
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest*,
                                         v1::ModelInfo* response) override {
    {
      absl::MutexLock lock(&w_->mu_);
      *response = w_->info_;
    }
    return Reply(context, grpc::Status::OK);
  }

 private:
  struct Refusal final : grpc::ServerWriteReactor<v1::GenerateResponse> {
    void OnDone() override { delete this; }
  };
  FakeWorker::Impl* const w_;
};

}  // namespace

void FakeWorker::Impl::Serve(const std::string& address) {
  absl::MutexLock lock(&server_mu_);
  worker_ = std::make_unique<FakeService>(this);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(worker_.get());
  if (options_.serve_generation) {
    generation_ = std::make_unique<FakeGeneration>(this);
    builder.RegisterService(generation_.get());
  }
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
  // Cancels every call and waits for every reactor; streams waiting on a timer need the timer
  // thread until then.
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
  worker_.reset();
  generation_.reset();
}

FakeWorker::Impl::~Impl() {
  Kill();
  {
    absl::MutexLock lock(&timer_mu_);
    stop_ = true;
    timer_cv_.Signal();
  }
  timer_thread_.join();
}

std::unique_ptr<Tokenizer> FakeWorker::TinyTokenizer() {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(TinyVocab());
  if (!t.ok()) {
    std::fprintf(stderr, "TinyVocab does not make a tokenizer: %s\n",
                 t.status().ToString().c_str());
    std::abort();
  }
  return *std::move(t);
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

namespace {

// gRPC 1.51 (Debian's) serves the C++ callback API from one process-wide completion queue,
// reference-counted by the channels and servers that use it and torn down when the count reaches
// zero. Tests that start and stop servers and channels case after case run that teardown again
// and again, and it races the next case's set-up ("ref_counted.h: assertion failed: prior > 0"
// from one of gRPC's own threads, seen once in 20 runs of router_worker_pool_test on a loaded
// machine). One channel that has made a callback call, kept for the life of the process, holds
// the count above zero. A serving router always holds it through its own server.
void HoldCallbackQueue() {
  static const bool held = [] {
    std::shared_ptr<grpc::Channel>* channel = new std::shared_ptr<grpc::Channel>(
        grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
    auto* stub = v1::Worker::NewStub(*channel).release();
    auto* context = new grpc::ClientContext;
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1));
    auto* request = new v1::GetLoadRequest;
    auto* response = new v1::WorkerLoad;
    absl::Notification* done = new absl::Notification;
    stub->async()->GetLoad(context, request, response, [done](grpc::Status) { done->Notify(); });
    done->WaitForNotification();
    return true;  // everything above is kept on purpose
  }();
  (void)held;
}

}  // namespace

std::unique_ptr<FakeWorker> FakeWorker::Start(Options options) {
  HoldCallbackQueue();
  auto impl = std::make_unique<Impl>(std::move(options));
  {
    absl::MutexLock lock(&impl->mu_);
    impl->load_ = impl->options_.load;
    impl->info_ = impl->options_.info;
  }
  impl->Serve(impl->options_.address);
  return std::unique_ptr<FakeWorker>(new FakeWorker(std::move(impl)));
}

FakeWorker::FakeWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FakeWorker::~FakeWorker() = default;

std::string FakeWorker::address() const { return absl::StrCat("127.0.0.1:", impl_->port_); }

std::shared_ptr<grpc::Channel> FakeWorker::NewChannel() const {
  return grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
}

void FakeWorker::SetLoad(const v1::WorkerLoad& load) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->load_ = load;
}

void FakeWorker::SetInfo(const v1::ModelInfo& info) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->info_ = info;
}

int FakeWorker::prefix_filters_sent() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->prefix_filters_sent_;
}

int FakeWorker::get_load_calls() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->get_load_calls_;
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

void FakeWorker::SetEnding(Ending ending) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->ending_ = ending;
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

int FakeWorker::max_concurrent_streams() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->max_streams_;
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
