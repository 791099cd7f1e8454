// Design of one generation request (class Generation, shared by its calls and its exchange):
//   - one Call (a gRPC ClientReadReactor) per prompt, all started at once;
//   - streamed: each message read is appended to `out_` as SSE events, and its call waits
//     (`waiting_`) until a Send holding that text is written; then it reads again. That read
//     starts outside a reaction (OnSent), so a waiting call holds its reactor (AddHold): without
//     the hold gRPC may finish the call and free its reader meanwhile. At most one
//     Send is outstanding; text that arrives meanwhile goes out with the next one. The HTTP
//     status is sent with the first message, so a request refused before any output (bad
//     request, full queue, no worker) gets its real status, not 200;
//   - not streamed: messages are accumulated and the body is sent when every call is over;
//   - the first failed call cancels the others; the client leaving cancels every call.
// All state is under mu_. gRPC operations are started under mu_ (gRPC does not run reactions
// inline from them); the exchange only posts to the HTTP server's threads.
#include "router/http/openai_frontend.h"

#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/api/proto_convert.h"
#include "nlohmann/json.hpp"
#include "router/http/openai_request.h"
#include "router/http/openai_response.h"

namespace pagellm {
namespace {

constexpr std::string_view kJson = "application/json";

void ReplyError(HttpExchange& exchange, const absl::Status& status) {
  exchange.Reply(HttpStatusFor(status.code()), kJson, OpenAiErrorBody(status));
}

std::string RandomId(std::string_view prefix) {
  thread_local absl::BitGen gen;
  return absl::StrFormat("%s%016x%016x", prefix, absl::Uniform<uint64_t>(gen),
                         absl::Uniform<uint64_t>(gen));
}

std::string ServedName(const std::string& configured, const ModelContext& model) {
  return configured.empty() ? model.info().model_name() : configured;
}

}  // namespace

class OpenAiFrontend::Generation final : public HttpExchange::Listener,
                                         public std::enable_shared_from_this<Generation> {
 public:
  Generation(OpenAiFrontend* frontend, std::shared_ptr<const ModelContext> model,
             std::shared_ptr<HttpExchange> exchange, OpenAiRequest request,
             OpenAiResponse::Config config)
      : frontend_(frontend),
        model_(std::move(model)),
        exchange_(std::move(exchange)),
        request_(std::move(request)),
        response_(std::move(config), &model_->tokenizer()) {}

  ~Generation() override = default;

  // Starts every call. REQUIRES: the shared_ptr owning this exists.
  void Start(v1::Generation::Stub* stub, const std::string& authorization) {
    const int n = static_cast<int>(request_.prompts.size());
    // The client leaving (OnClosed) cancels the calls, streamed or not.
    exchange_->SetListener(shared_from_this());
    absl::ReleasableMutexLock lock(&mu_);
    if (closed_) {  // the client left already
      lock.Release();
      frontend_->RequestDone();
      return;
    }
    remaining_ = n;
    waiting_.reserve(n);
    in_flight_.reserve(n);
    calls_.reserve(n);
    for (int i = 0; i < n; ++i) calls_.push_back(std::make_unique<Call>(this, i));
    for (int i = 0; i < n; ++i) {
      Call& c = *calls_[i];
      c.self = shared_from_this();
      if (!authorization.empty()) c.context.AddMetadata("authorization", authorization);
      stub->async()->Generate(&c.context, &request_.prompts[i], &c);
      c.reading = true;
      c.StartRead(&c.message);
      c.StartCall();
    }
  }

  // HttpExchange::Listener.
  void OnSent(bool ok) override {
    absl::MutexLock lock(&mu_);
    sending_ = false;
    if (!ok) return CloseLocked();  // the client is gone
    for (int k : in_flight_) ResumeLocked(k);
    in_flight_.clear();
    FlushLocked();
  }

  void OnClosed() override {
    absl::MutexLock lock(&mu_);
    CloseLocked();
  }

 private:
  struct Call final : public grpc::ClientReadReactor<v1::GenerateResponse> {
    Call(Generation* g, int i) : generation(g), index(i) {}
    void OnReadDone(bool ok) override { generation->OnReadDone(index, ok); }
    void OnDone(const grpc::Status& status) override {
      // The last call's OnDone may drop the last reference to the generation, and with it
      // this call: nothing may touch `this` after.
      std::shared_ptr<Generation> keep = std::move(self);
      keep->OnCallDone(index, status);
    }

    Generation* const generation;
    const int index;
    std::shared_ptr<Generation> self;  // until OnDone
    grpc::ClientContext context;
    v1::GenerateResponse message;
    bool done = false;     // OnDone seen
    bool reading = false;  // a read is outstanding
    bool held = false;     // AddHold'ed while its text waits to be sent
  };

  void OnReadDone(int k, bool ok) {
    absl::MutexLock lock(&mu_);
    Call& c = *calls_[k];
    c.reading = false;
    if (!ok || closed_) return;  // OnDone follows
    if (!request_.stream) {
      response_.Append(k, c.message, nullptr);
      c.message.Clear();
      ResumeLocked(k);
      return;
    }
    StartStreamLocked();
    const size_t before = out_.size();
    response_.Append(k, c.message, &out_);
    c.message.Clear();
    if (out_.size() == before) {  // nothing of its own to send (the usage-only last message)
      ResumeLocked(k);
    } else {
      c.AddHold();
      c.held = true;
      waiting_.push_back(k);
    }
    FlushLocked();
  }

  void OnCallDone(int k, const grpc::Status& grpc_status) {
    bool last = false;
    {
      absl::MutexLock lock(&mu_);
      calls_[k]->done = true;
      const absl::Status status = FromGrpcStatus(grpc_status);
      if (!status.ok() && error_.ok() && !closed_) {
        error_ = status;
        for (auto& c : calls_) {
          if (!c->done) c->context.TryCancel();
        }
      }
      last = --remaining_ == 0;
      if (last) FinishLocked();
    }
    if (last) frontend_->RequestDone();
  }

  // Every call is over: the answer, or the end of the stream.
  void FinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (closed_) return;
    if (!request_.stream) {
      if (!error_.ok()) return ReplyError(*exchange_, error_);
      exchange_->Reply(200, kJson, response_.Body());
      return;
    }
    if (!started_ && !error_.ok()) return ReplyError(*exchange_, error_);
    StartStreamLocked();
    if (!error_.ok()) absl::StrAppend(&out_, "data: ", OpenAiErrorBody(error_), "\n\n");
    response_.AppendEnd(&out_);
    ending_ = true;
    FlushLocked();
  }

  void StartStreamLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (started_) return;
    started_ = true;
    exchange_->StartStream(200, "text/event-stream");
    response_.AppendStart(&out_);
  }

  // Sends what is buffered when no Send is outstanding; ends the stream once all is sent.
  void FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (sending_ || closed_) return;
    if (out_.empty()) {
      if (ending_ && in_flight_.empty()) {
        ending_ = false;
        exchange_->EndStream();
      }
      return;
    }
    sending_ = true;
    in_flight_.swap(waiting_);  // in_flight_ is empty here
    exchange_->Send(&out_);
  }

  // The client left: cancels the calls; nothing more is sent, so the waiting calls let go of
  // their holds (ResumeLocked reads no more once closed_).
  void CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    closed_ = true;
    for (auto& c : calls_) {
      if (!c->done) c->context.TryCancel();
    }
    for (int k : waiting_) ResumeLocked(k);
    for (int k : in_flight_) ResumeLocked(k);
    waiting_.clear();
    in_flight_.clear();
  }

  // Reads the next message of call k unless the client left; then lets go of its hold. Under
  // mu_: RemoveHold schedules OnDone rather than running it.
  void ResumeLocked(int k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Call& c = *calls_[k];
    if (!c.done && !c.reading && !closed_) {
      c.reading = true;
      c.StartRead(&c.message);
    }
    if (c.held) {
      c.held = false;
      c.RemoveHold();
    }
  }

  OpenAiFrontend* const frontend_;
  const std::shared_ptr<const ModelContext> model_;  // keeps the tokenizer of response_
  const std::shared_ptr<HttpExchange> exchange_;
  OpenAiRequest request_;  // prompts are read by their calls: not changed after Start

  absl::Mutex mu_;
  OpenAiResponse response_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Call>> calls_ ABSL_GUARDED_BY(mu_);
  int remaining_ ABSL_GUARDED_BY(mu_) = 0;           // calls not done
  absl::Status error_ ABSL_GUARDED_BY(mu_);          // the first call that failed
  bool closed_ ABSL_GUARDED_BY(mu_) = false;         // the client left
  bool started_ ABSL_GUARDED_BY(mu_) = false;        // the stream's status line is sent
  bool sending_ ABSL_GUARDED_BY(mu_) = false;        // a Send is outstanding
  bool ending_ ABSL_GUARDED_BY(mu_) = false;         // [DONE] is in out_ or being sent
  std::string out_ ABSL_GUARDED_BY(mu_);             // events not yet handed to Send
  std::vector<int> waiting_ ABSL_GUARDED_BY(mu_);    // calls whose text is in out_
  std::vector<int> in_flight_ ABSL_GUARDED_BY(mu_);  // calls whose text the Send holds
};

OpenAiFrontend::OpenAiFrontend(Options options, Deps deps)
    : options_(std::move(options)),
      deps_(std::move(deps)),
      stub_(v1::Generation::NewStub(deps_.channel)) {}

int OpenAiFrontend::open_requests() const {
  absl::MutexLock lock(&mu_);
  return open_requests_;
}

bool OpenAiFrontend::WaitForRequests(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(
                                   +[](int* n) { return *n == 0; }, &open_requests_),
                               deadline);
}

void OpenAiFrontend::RequestDone() {
  absl::MutexLock lock(&mu_);
  --open_requests_;
}

void OpenAiFrontend::Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
  const std::string& path = request.path;
  const bool get = request.method == "GET";
  const bool post = request.method == "POST";
  if (path.rfind("/v1/", 0) == 0 && deps_.authorized && !deps_.authorized(request.authorization)) {
    return exchange->Reply(
        401, kJson,
        OpenAiErrorBody(401, "a valid API key is required (Authorization: Bearer KEY)", "",
                        "invalid_api_key"),
        "WWW-Authenticate: Bearer\r\n");
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!post) {
      return exchange->Reply(405, kJson,
                             OpenAiErrorBody(405, absl::StrCat(path, " takes POST"), "", ""),
                             "Allow: POST\r\n");
    }
    return Generate(request, path == "/v1/chat/completions", std::move(exchange));
  }
  if (path == "/health" || path == "/v1/models" || path == "/version") {
    if (!get) {
      return exchange->Reply(405, kJson,
                             OpenAiErrorBody(405, absl::StrCat(path, " takes GET"), "", ""),
                             "Allow: GET\r\n");
    }
  }
  if (path == "/health") {
    if (deps_.serving()) return exchange->Reply(200, kJson, "{}");
    return ReplyError(*exchange, absl::UnavailableError("no worker is ready"));
  }
  if (path == "/version") {
    return exchange->Reply(200, kJson, nlohmann::json{{"version", options_.version}}.dump());
  }
  if (path == "/v1/models") {
    std::shared_ptr<const ModelContext> model = deps_.model();
    if (model == nullptr) {
      return ReplyError(*exchange,
                        absl::UnavailableError("the router has not reached a worker yet"));
    }
    const std::string name = ServedName(options_.served_model_name, *model);
    nlohmann::ordered_json card = {{"id", name},
                                   {"object", "model"},
                                   {"created", absl::ToUnixSeconds(absl::Now())},
                                   {"owned_by", "pagellm"},
                                   {"root", model->info().model_name()},
                                   {"parent", nullptr},
                                   {"max_model_len", model->max_model_len()}};
    nlohmann::ordered_json list = {{"object", "list"},
                                   {"data", nlohmann::ordered_json::array({card})}};
    return exchange->Reply(200, kJson,
                           list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  exchange->Reply(
      404, kJson,
      OpenAiErrorBody(404, absl::StrCat("no route for ", request.method, " ", path.substr(0, 200)),
                      "", "not_found"));
}

void OpenAiFrontend::Generate(const HttpRequest& http, bool chat,
                              std::shared_ptr<HttpExchange> exchange) {
  absl::StatusOr<OpenAiRequest> request =
      chat ? ParseChatRequest(http.body) : ParseCompletionRequest(http.body);
  if (!request.ok()) return ReplyError(*exchange, request.status());
  std::shared_ptr<const ModelContext> model = deps_.model();
  if (model == nullptr) {
    return ReplyError(*exchange, absl::UnavailableError("the router has not reached a worker yet"));
  }
  const std::string name = ServedName(options_.served_model_name, *model);
  if (!request->model.empty() && request->model != name) {
    return exchange->Reply(
        404, kJson,
        OpenAiErrorBody(404,
                        absl::StrCat("The model `", request->model.substr(0, 256),
                                     "` does not exist; this server serves `", name, "`."),
                        "model", "model_not_found"));
  }
  OpenAiResponse::Config config;
  config.kind = request->kind;
  config.id = RandomId(chat ? "chatcmpl-" : "cmpl-");
  config.created = absl::ToUnixSeconds(absl::Now());
  config.model = name;
  config.prompts = static_cast<int>(request->prompts.size());
  config.n = request->n;
  config.logprobs = request->logprobs;
  config.include_usage = request->include_usage;
  for (size_t i = 0; i < request->prompts.size(); ++i) {
    v1::GenerateRequest& p = request->prompts[i];
    p.set_request_id(config.prompts == 1 ? config.id : absl::StrCat(config.id, "-", i));
    if (request->echo) {
      config.echo.push_back(
          p.has_text() ? p.text()
                       : model->tokenizer().Decode(absl::MakeConstSpan(p.token_ids().ids().data(),
                                                                       p.token_ids().ids().size()),
                                                   /*skip_special=*/false));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    ++open_requests_;
  }
  auto generation = std::make_shared<Generation>(this, std::move(model), std::move(exchange),
                                                 *std::move(request), std::move(config));
  generation->Start(stub_.get(), http.authorization);
}

}  // namespace pagellm
