// Design of one generation request (class Generation, shared by its calls and its exchange):
//   - one Call (the client side of a RoutedStream) per prompt (or embedding input), at most
//     kMaxCallsInFlight of them open at once, the next opened as one ends;
//   - streamed: each message is appended to `out_` as SSE events, and its stream's write stays
//     outstanding (`waiting_`) until a Send holding that text is written; then the stream
//     delivers its next message. At most one Send is outstanding; text that arrives meanwhile
//     goes out with the next one. The HTTP status is sent with the first message, so a request
//     refused before any output (bad request, full queue, no worker) gets its real status;
//   - not streamed: messages are accumulated and the body is sent when every call is over; a
//     call whose worker fails mid-way starts over on another worker (RoutedStream's restart),
//     its choices reset;
//   - the first failed call cancels the others; the client leaving cancels every call.
// All state is under mu_. The streams are called with mu_ released (they may call back at
// once); the exchange only posts to the HTTP server's threads, so it is called under mu_.
#include "router/http/openai_frontend.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/api/proto_convert.h"
#include "common/sampling/sampling_params.h"
#include "nlohmann/json.hpp"
#include "router/http/embedding_response.h"
#include "router/http/openai_request.h"
#include "router/http/openai_response.h"
#include "router/http/responses_api.h"
#include "router/http/score_response.h"
#include "router/request_validator.h"

namespace pagellm {
namespace {

constexpr std::string_view kJson = "application/json";

void ReplyError(HttpExchange& exchange, const absl::Status& status) {
  exchange.Reply(HttpStatusFor(status.code()), kJson, OpenAiErrorBody(status));
}

// 405 naming the one method `path` takes.
void ReplyWrongMethod(HttpExchange& exchange, const std::string& path, const char* method) {
  exchange.Reply(405, kJson, OpenAiErrorBody(405, absl::StrCat(path, " takes ", method), "", ""),
                 absl::StrCat("Allow: ", method, "\r\n"));
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
             std::unique_ptr<ResponseBuilder> response)
      : frontend_(frontend),
        model_(std::move(model)),
        exchange_(std::move(exchange)),
        request_(std::move(request)),
        response_(std::move(response)) {}

  ~Generation() override = default;

  // Makes a call per prompt and opens the first kMaxCallsInFlight. REQUIRES: the shared_ptr
  // owning this exists.
  void Start(OpenStream open) {
    const int n = static_cast<int>(request_.prompts.size());
    open_ = std::move(open);
    // The client leaving (OnClosed) cancels the streams, streamed or not.
    exchange_->SetListener(shared_from_this());
    {
      absl::MutexLock lock(&mu_);
      if (closed_) {  // the client left already
        frontend_->RequestDone();
        return;
      }
      remaining_ = n;
      waiting_.reserve(n);
      in_flight_.reserve(n);
      calls_.reserve(n);
      for (int i = 0; i < n; ++i) calls_.push_back(std::make_unique<Call>(this, i));
    }
    OpenMore();
  }

  // HttpExchange::Listener.
  void OnSent(bool ok) override {
    if (!ok) return OnClosed();  // the client is gone
    Streams sent;
    {
      absl::MutexLock lock(&mu_);
      sending_ = false;
      for (int k : in_flight_) sent.push_back(calls_[k]->stream.get());
      in_flight_.clear();
      FlushLocked();
    }
    for (RoutedStream* s : sent) s->OnWriteDone(true);
  }

  void OnClosed() override {
    Streams cancel, unsent;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      closed_ = true;
      CollectLocked(&cancel);
      for (int k : waiting_) unsent.push_back(calls_[k]->stream.get());
      for (int k : in_flight_) unsent.push_back(calls_[k]->stream.get());
      waiting_.clear();
      in_flight_.clear();
    }
    for (RoutedStream* s : cancel) s->Cancel();
    for (RoutedStream* s : unsent) s->OnWriteDone(false);
  }

 private:
  // Streams to act on once mu_ is released (n is small: no allocation in the common case).
  using Streams = absl::InlinedVector<RoutedStream*, 4>;

  // One prompt's stream: its client side.
  struct Call final : public RoutedStream::Client {
    Call(Generation* g, int i) : generation(g), index(i) {}
    bool StartWrite(const v1::GenerateResponse& m) override {
      return generation->OnMessage(index, m);
    }
    void Finish(const absl::Status& status) override {
      // The last call's Finish may drop the last reference to the generation, and with it this
      // call and its stream: nothing may touch them after.
      std::shared_ptr<Generation> keep = std::move(self);
      keep->OnCallDone(index, status);
    }
    // Not streamed, the answer goes out whole at the end: a worker that fails mid-way is
    // retried elsewhere from the start.
    bool Restartable() const override { return !generation->request_.stream; }
    void Restart() override { generation->OnRestart(index); }

    Generation* const generation;
    const int index;
    std::shared_ptr<Generation> self;      // until Finish
    std::unique_ptr<RoutedStream> stream;  // set under mu_ once opened
    bool done = false;                     // Finish seen (under mu_)
  };

  // Opens calls while fewer than kMaxCallsInFlight are open and not done. After a failure, or
  // once the client has left, the calls not opened are over without opening (the last one to
  // end finishes the request).
  void OpenMore() {
    for (;;) {
      Call* c = nullptr;
      bool last = false;
      {
        absl::MutexLock lock(&mu_);
        const int n = static_cast<int>(calls_.size());
        if (next_ == n) return;
        if (closed_ || !error_.ok()) {
          remaining_ -= n - next_;
          next_ = n;
          last = remaining_ == 0;
          if (last) FinishLocked();
        } else if (next_ - calls_done_ >= kMaxCallsInFlight) {
          return;
        } else {
          c = calls_[next_++].get();
          c->self = shared_from_this();  // until its Finish
        }
      }
      if (last) frontend_->RequestDone();
      if (c == nullptr) return;
      absl::StatusOr<std::unique_ptr<RoutedStream>> stream =
          open_(request_.prompts[c->index], absl::InfiniteFuture(), c);
      if (!stream.ok()) {
        c->Finish(stream.status());
        continue;
      }
      RoutedStream* s = stream->get();
      {
        absl::MutexLock lock(&mu_);
        c->stream = *std::move(stream);
      }
      s->Start();
      bool cancel = false;
      {
        absl::MutexLock lock(&mu_);
        cancel = closed_ || !error_.ok();  // CloseLocked or a failure may have missed it
      }
      if (cancel) s->Cancel();
    }
  }

  // The streams opened and not finished.
  void CollectLocked(Streams* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto& c : calls_) {
      if (!c->done && c->stream != nullptr) out->push_back(c->stream.get());
    }
  }

  // A message of stream k (RoutedStream::Client::StartWrite). True when it needs no wait.
  bool OnMessage(int k, const v1::GenerateResponse& m) {
    absl::MutexLock lock(&mu_);
    if (closed_) return true;  // its Cancel is coming
    if (!request_.stream) {
      response_->Append(k, m, nullptr);
      return true;
    }
    StartStreamLocked();
    const size_t before = out_.size();
    response_->Append(k, m, &out_);
    if (out_.size() == before) return true;  // nothing of its own (the usage-only message)
    waiting_.push_back(k);
    FlushLocked();
    return false;
  }

  // Stream k starts over on another worker (not streamed): its choices so far are dropped.
  void OnRestart(int k) {
    absl::MutexLock lock(&mu_);
    response_->Reset(k);
  }

  void OnCallDone(int k, const absl::Status& status) {
    Streams cancel;
    bool last = false;
    {
      absl::MutexLock lock(&mu_);
      calls_[k]->done = true;
      ++calls_done_;
      if (!status.ok() && error_.ok() && !closed_) {
        error_ = status;
        CollectLocked(&cancel);  // the first failure cancels the others
      }
      last = --remaining_ == 0;
      if (last) FinishLocked();
    }
    for (RoutedStream* s : cancel) s->Cancel();
    if (last) {
      frontend_->RequestDone();
    } else {
      OpenMore();  // the next call, or the end of those never opened
    }
  }

  // Every call is over: the answer, or the end of the stream.
  void FinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (closed_) return;
    if (!request_.stream) {
      if (!error_.ok()) return ReplyError(*exchange_, error_);
      exchange_->Reply(200, kJson, response_->Body());
      return;
    }
    if (!started_ && !error_.ok()) return ReplyError(*exchange_, error_);
    StartStreamLocked();
    if (!error_.ok()) response_->AppendError(error_, &out_);
    response_->AppendEnd(&out_);
    ending_ = true;
    FlushLocked();
  }

  void StartStreamLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (started_) return;
    started_ = true;
    exchange_->StartStream(200, "text/event-stream");
    response_->AppendStart(&out_);
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

  // Calls open at once, at most: a request with thousands of embedding inputs takes its turn in
  // the router's queue a slice at a time instead of filling it.
  static constexpr int kMaxCallsInFlight = 256;

  OpenAiFrontend* const frontend_;
  const std::shared_ptr<const ModelContext> model_;  // keeps the tokenizer of response_
  const std::shared_ptr<HttpExchange> exchange_;
  OpenAiRequest request_;  // prompts are read by their streams: not changed after Start
  OpenStream open_;        // set by Start, then only read

  absl::Mutex mu_;
  const std::unique_ptr<ResponseBuilder> response_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Call>> calls_ ABSL_GUARDED_BY(mu_);
  int next_ ABSL_GUARDED_BY(mu_) = 0;                // calls_[0, next_) were opened (or dropped)
  int calls_done_ ABSL_GUARDED_BY(mu_) = 0;          // opened calls whose Finish came
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
    : options_(std::move(options)), deps_(std::move(deps)) {
  if (options_.load_adapters_on_demand && deps_.change_adapters) {
    on_demand_ = std::make_unique<AdaptersOnDemand>(deps_.change_adapters);
  }
}

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
  const bool tokenizer_route = path == "/tokenize" || path == "/detokenize";
  const bool score_route = path == "/v1/score" || path == "/score";
  const bool rerank_route = path == "/v1/rerank" || path == "/rerank";
  // Everything but the probes needs a key, the unversioned aliases too.
  if ((path.rfind("/v1/", 0) == 0 || tokenizer_route || path == "/score" || path == "/rerank") &&
      deps_.authorized && !deps_.authorized(request.authorization)) {
    return exchange->Reply(
        401, kJson,
        OpenAiErrorBody(401, "a valid API key is required (Authorization: Bearer KEY)", "",
                        "invalid_api_key"),
        "WWW-Authenticate: Bearer\r\n");
  }
  const bool generation_route = path == "/v1/completions" || path == "/v1/chat/completions" ||
                                path == "/v1/responses" || path == "/v1/embeddings" ||
                                score_route || rerank_route;
  const bool get_route = path == "/health" || path == "/v1/models" || path == "/version";
  if ((generation_route || tokenizer_route) && !post)
    return ReplyWrongMethod(*exchange, path, "POST");
  if (get_route && !get) return ReplyWrongMethod(*exchange, path, "GET");
  if (path == "/v1/embeddings") return Embed(request, EmbedRoute::kEmbeddings, std::move(exchange));
  if (path == "/v1/responses") return Respond(request, std::move(exchange));
  if ((path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter") &&
      deps_.change_adapters) {
    if (!post) return ReplyWrongMethod(*exchange, path, "POST");
    return ChangeAdapters(request, path == "/v1/load_lora_adapter", std::move(exchange));
  }
  if (score_route) return Embed(request, EmbedRoute::kScore, std::move(exchange));
  if (rerank_route) return Embed(request, EmbedRoute::kRerank, std::move(exchange));
  if (generation_route) {
    return Generate(request, path == "/v1/chat/completions", std::move(exchange));
  }
  if (tokenizer_route) return Tokenize(request, path == "/tokenize", *exchange);
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
    nlohmann::ordered_json data = nlohmann::ordered_json::array({card});
    // LoRA adapters as vLLM lists them: a card each, the base model as parent.
    for (const std::string& adapter : Adapters(*model)) {
      nlohmann::ordered_json a = card;
      a["id"] = adapter;
      a["root"] = adapter;
      a["parent"] = name;
      data.push_back(std::move(a));
    }
    nlohmann::ordered_json list = {{"object", "list"}, {"data", std::move(data)}};
    return exchange->Reply(200, kJson,
                           list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  exchange->Reply(
      404, kJson,
      OpenAiErrorBody(404, absl::StrCat("no route for ", request.method, " ", path.substr(0, 200)),
                      "", "not_found"));
}

namespace {

// 404 for a request naming another model than the one served or one of its LoRA adapters.
void ReplyUnknownModel(HttpExchange& exchange, const std::string& asked,
                       const std::string& served) {
  exchange.Reply(404, kJson,
                 OpenAiErrorBody(404,
                                 absl::StrCat("The model `", asked.substr(0, 256),
                                              "` does not exist; this server serves `", served,
                                              "` and the LoRA adapters /v1/models lists."),
                                 "model", "model_not_found"));
}

// What a request's "model" names: the base model (empty, or the served name), a LoRA adapter
// the workers serve (its name), or nothing served (nullopt).
std::optional<std::string> AdapterOf(const std::string& asked, const std::string& served,
                                     const std::vector<std::string>& adapters) {
  if (asked.empty() || asked == served) return std::string();
  for (const std::string& adapter : adapters) {
    if (adapter == asked) return adapter;
  }
  return std::nullopt;
}

// Request ids: `id` for a single prompt, `id`-i for prompt i of several; every prompt runs with
// `adapter` ("" for the base model).
void SetRequestIds(const std::string& id, const std::string& adapter, OpenAiRequest* request) {
  const size_t n = request->prompts.size();
  for (size_t i = 0; i < n; ++i) {
    v1::GenerateRequest& p = request->prompts[i];
    p.set_request_id(n == 1 ? id : absl::StrCat(id, "-", i));
    p.mutable_sampling()->set_lora_adapter(adapter);
  }
}

}  // namespace

void OpenAiFrontend::Tokenize(const HttpRequest& http, bool tokenize, HttpExchange& exchange) {
  std::shared_ptr<const ModelContext> model = deps_.model();
  if (model == nullptr) {
    return ReplyError(exchange, absl::UnavailableError("the router has not reached a worker yet"));
  }
  const std::string name = ServedName(options_.served_model_name, *model);
  nlohmann::ordered_json out;
  if (tokenize) {
    absl::StatusOr<TokenizeHttpRequest> r = ParseTokenizeRequest(http.body);
    if (!r.ok()) return ReplyError(exchange, r.status());
    if (!AdapterOf(r->model, name, Adapters(*model)))
      return ReplyUnknownModel(exchange, r->model, name);
    v1::TokenizeResponse response;
    if (absl::Status st = AnswerTokenize(*model, r->request, &response); !st.ok()) {
      return ReplyError(exchange, st);
    }
    out["count"] = response.token_ids_size();
    out["max_model_len"] = model->max_model_len();
    out["tokens"] = response.token_ids();
    if (r->return_token_strs) {
      nlohmann::ordered_json strs = nlohmann::ordered_json::array();
      for (int32_t id : response.token_ids()) {
        strs.push_back(std::string(model->tokenizer().TokenText(id)));
      }
      out["token_strs"] = std::move(strs);
    } else {
      out["token_strs"] = nullptr;
    }
  } else {
    absl::StatusOr<DetokenizeHttpRequest> r = ParseDetokenizeRequest(http.body);
    if (!r.ok()) return ReplyError(exchange, r.status());
    if (!AdapterOf(r->model, name, Adapters(*model)))
      return ReplyUnknownModel(exchange, r->model, name);
    v1::DetokenizeResponse response;
    if (absl::Status st = AnswerDetokenize(*model, r->request, &response); !st.ok()) {
      return ReplyError(exchange, st);
    }
    out["prompt"] = response.text();
  }
  exchange.Reply(200, kJson, out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::vector<std::string> OpenAiFrontend::Adapters(const ModelContext& model) const {
  if (deps_.adapters) return deps_.adapters();
  return {model.info().lora_adapters().begin(), model.info().lora_adapters().end()};
}

void OpenAiFrontend::ChangeAdapters(const HttpRequest& http, bool load,
                                    std::shared_ptr<HttpExchange> exchange) {
  absl::StatusOr<LoraChangeRequest> change = ParseLoraChangeRequest(http.body, load);
  if (!change.ok()) return ReplyError(*exchange, change.status());
  std::shared_ptr<const ModelContext> model = deps_.model();
  if (model == nullptr) {
    return ReplyError(*exchange, absl::UnavailableError("the router has not reached a worker yet"));
  }
  if (const std::string name = ServedName(options_.served_model_name, *model);
      change->lora_name == name) {
    return ReplyError(*exchange, absl::InvalidArgumentError(absl::StrCat(
                                     "lora_name `", name, "` is the served model's name")));
  }
  {
    absl::MutexLock lock(&mu_);
    ++open_requests_;
  }
  const std::string name = change->lora_name;
  deps_.change_adapters(*change, [this, load, name, exchange](absl::Status st) mutable {
    if (st.ok()) {
      // vLLM's answer, word for word (clients match on it).
      exchange->Reply(200, "text/plain; charset=utf-8",
                      absl::StrCat("Success: LoRA adapter '", name, "' ",
                                   load ? "added" : "removed", " successfully."));
    } else if (st.code() == absl::StatusCode::kAlreadyExists) {
      exchange->Reply(400, kJson, OpenAiErrorBody(400, std::string(st.message()), "lora_name", ""));
    } else {
      ReplyError(*exchange, st);
    }
    exchange.reset();  // before the count, as above
    RequestDone();
  });
}

OpenAiFrontend::Served OpenAiFrontend::Resolve(
    const std::string& asked, const std::shared_ptr<HttpExchange>& exchange,
    const std::function<std::function<void()>()>& retry) {
  Served out;
  std::shared_ptr<const ModelContext> model = deps_.model();
  if (model == nullptr) {
    ReplyError(*exchange, absl::UnavailableError("the router has not reached a worker yet"));
    return out;
  }
  out.name = ServedName(options_.served_model_name, *model);
  const std::optional<std::string> adapter = AdapterOf(asked, out.name, Adapters(*model));
  if (!adapter) {
    if (on_demand_ != nullptr && retry != nullptr && CheckLoraAdapterName(asked, "model").ok()) {
      LoadThenRetry(asked, exchange, retry());
    } else {
      ReplyUnknownModel(*exchange, asked, out.name);
    }
    return out;
  }
  out.adapter = *adapter;
  out.model = std::move(model);
  return out;
}

void OpenAiFrontend::LoadThenRetry(const std::string& asked, std::shared_ptr<HttpExchange> exchange,
                                   std::function<void()> retry) {
  {
    absl::MutexLock lock(&mu_);
    ++open_requests_;
  }
  on_demand_->Load(asked, [this, asked, exchange = std::move(exchange),
                           retry = std::move(retry)](absl::Status st) mutable {
    std::shared_ptr<const ModelContext> model = deps_.model();
    if (model == nullptr) {
      ReplyError(*exchange, absl::UnavailableError("no worker is ready"));
    } else if (AdapterOf(asked, "", Adapters(*model)).has_value()) {
      retry();  // served now (by the workers where the load succeeded, at least)
    } else if (st.ok() || absl::IsNotFound(st)) {
      ReplyUnknownModel(*exchange, asked, ServedName(options_.served_model_name, *model));
    } else {
      ReplyError(*exchange, st);
    }
    // Nothing of the HTTP server's outlives the count: Shutdown may stop it once it is 0.
    retry = nullptr;
    exchange.reset();
    RequestDone();
  });
}

void OpenAiFrontend::Generate(const HttpRequest& http, bool chat,
                              std::shared_ptr<HttpExchange> exchange, bool on_demand) {
  absl::StatusOr<OpenAiRequest> request =
      chat ? ParseChatRequest(http.body) : ParseCompletionRequest(http.body);
  if (!request.ok()) return ReplyError(*exchange, request.status());
  std::function<std::function<void()>()> retry;
  if (on_demand) {  // copies the request only if its adapter is to be loaded
    retry = [&] { return [this, http, chat, exchange] { Generate(http, chat, exchange, false); }; };
  }
  Served served = Resolve(request->model, exchange, retry);
  if (served.model == nullptr) return;
  std::shared_ptr<const ModelContext> model = std::move(served.model);
  const std::string& name = served.name;
  const std::string& adapter = served.adapter;
  OpenAiResponse::Config config;
  if (chat) {
    absl::StatusOr<ToolCallFormat> format = ToolFormatFor(*request);
    if (!format.ok()) return ReplyError(*exchange, format.status());
    config.tool_format = *format;
  }
  config.kind = request->kind;
  config.tool_choice = request->tool_choice;
  config.reasoning = chat && SplitsReasoning(request->prompts.front());
  config.id = RandomId(chat ? "chatcmpl-" : "cmpl-");
  config.created = absl::ToUnixSeconds(absl::Now());
  config.model = adapter.empty() ? name : adapter;  // echoed as asked, as vLLM does
  config.prompts = static_cast<int>(request->prompts.size());
  config.n = request->n;
  config.logprobs = request->logprobs;
  config.echo_logprobs = request->echo_logprobs;
  config.echo_only = request->echo_only;
  config.prompt_logprobs = request->prompt_logprobs;
  config.include_usage = request->include_usage;
  config.return_token_ids = request->return_token_ids;
  SetRequestIds(config.id, adapter, &*request);
  for (size_t i = 0; i < request->prompts.size(); ++i) {
    v1::GenerateRequest& p = request->prompts[i];
    if (request->echo) {
      config.echo.push_back(
          p.has_text() ? p.text()
                       : model->tokenizer().Decode(absl::MakeConstSpan(p.token_ids().ids().data(),
                                                                       p.token_ids().ids().size()),
                                                   /*skip_special=*/false));
    }
  }
  auto response = std::make_unique<OpenAiResponse>(std::move(config), &model->tokenizer());
  Run(std::move(model), std::move(exchange), *std::move(request), std::move(response));
}

absl::StatusOr<ToolCallFormat> OpenAiFrontend::ToolFormatFor(OpenAiRequest& request) const {
  if (request.tool_choice.mode == ToolChoice::Mode::kAuto &&
      !options_.tool_call_format.has_value()) {
    return absl::InvalidArgumentError(
        "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to "
        "be set (pagellm-router: --tool-call-parser=hermes, llama3_json or mistral); or "
        "give tool_choice \"none\", \"required\" or a named function");
  }
  const ToolCallFormat format = options_.tool_call_format.value_or(ToolCallFormat::kHermes);
  if (format == ToolCallFormat::kMistral && request.tool_choice.mode == ToolChoice::Mode::kAuto) {
    // [TOOL_CALLS] is a control token: the reply must keep it to be read (vLLM does this too).
    request.prompts.front().mutable_sampling()->set_skip_special_tokens(false);
  }
  return format;
}

bool OpenAiFrontend::SplitsReasoning(const v1::GenerateRequest& chat) const {
  return options_.reasoning_format.has_value() && !chat.sampling().has_structured_output() &&
         ThinksFor(*options_.reasoning_format, chat.chat().chat_template_kwargs());
}

void OpenAiFrontend::Respond(const HttpRequest& http, std::shared_ptr<HttpExchange> exchange,
                             bool on_demand) {
  absl::StatusOr<ResponsesRequest> request = ParseResponsesRequest(http.body);
  if (!request.ok()) return ReplyError(*exchange, request.status());
  std::function<std::function<void()>()> retry;
  if (on_demand) {
    retry = [&] { return [this, http, exchange] { Respond(http, exchange, false); }; };
  }
  Served served = Resolve(request->chat.model, exchange, retry);
  if (served.model == nullptr) return;
  OpenAiRequest chat = std::move(request->chat);
  absl::StatusOr<ToolCallFormat> format = ToolFormatFor(chat);
  if (!format.ok()) return ReplyError(*exchange, format.status());
  ResponsesResponse::Config config;
  config.tool_format = *format;
  config.reasoning = SplitsReasoning(chat.prompts.front());
  config.id = RandomId("resp_");
  config.item_id = RandomId("msg_");
  config.created_at = absl::ToUnixSeconds(absl::Now());
  config.model = served.adapter.empty() ? served.name : served.adapter;
  config.stream = chat.stream;
  config.echo = *std::move(request);
  config.echo.chat.tool_choice = chat.tool_choice;  // what the reply is read under
  // The values the request runs with: the model's defaults where it set none.
  const v1::SamplingParams& defaults = served.model->info().default_sampling();
  if (!config.echo.temperature && defaults.has_temperature()) {
    config.echo.temperature = defaults.temperature();
  }
  if (!config.echo.top_p && defaults.has_top_p()) config.echo.top_p = defaults.top_p();
  SetRequestIds(config.id, served.adapter, &chat);
  Run(std::move(served.model), std::move(exchange), std::move(chat),
      std::make_unique<ResponsesResponse>(std::move(config)));
}

void OpenAiFrontend::Embed(const HttpRequest& http, EmbedRoute route,
                           std::shared_ptr<HttpExchange> exchange, bool on_demand) {
  OpenAiRequest request;
  ScoreHttpRequest score;
  if (route == EmbedRoute::kEmbeddings) {
    absl::StatusOr<OpenAiRequest> parsed = ParseEmbeddingRequest(http.body);
    if (!parsed.ok()) return ReplyError(*exchange, parsed.status());
    request = *std::move(parsed);
  } else {
    absl::StatusOr<ScoreHttpRequest> parsed =
        ParseScoreRequest(http.body, route == EmbedRoute::kRerank);
    if (!parsed.ok()) return ReplyError(*exchange, parsed.status());
    score = *std::move(parsed);
    request = std::move(score.embed);
  }
  std::function<std::function<void()>()> retry;
  if (on_demand) {
    retry = [&] { return [this, http, route, exchange] { Embed(http, route, exchange, false); }; };
  }
  Served served = Resolve(request.model, exchange, retry);
  if (served.model == nullptr) return;
  const std::string id = RandomId(route == EmbedRoute::kEmbeddings ? "embd-"
                                  : route == EmbedRoute::kScore    ? "score-"
                                                                   : "rerank-");
  const int64_t created = absl::ToUnixSeconds(absl::Now());
  const std::string model = served.adapter.empty() ? served.name : served.adapter;
  const int inputs = static_cast<int>(request.prompts.size());
  SetRequestIds(id, served.adapter, &request);
  std::unique_ptr<ResponseBuilder> response;
  if (route == EmbedRoute::kEmbeddings) {
    response = std::make_unique<EmbeddingResponse>(EmbeddingResponse::Config{
        .id = id, .created = created, .model = model, .inputs = inputs, .base64 = request.base64});
  } else {
    response = std::make_unique<ScoreResponse>(
        ScoreResponse::Config{.id = id,
                              .created = created,
                              .model = model,
                              .inputs = inputs,
                              .pairs = std::move(score.pairs),
                              .rerank = route == EmbedRoute::kRerank,
                              .documents = std::move(score.documents),
                              .top_n = score.top_n});
  }
  Run(std::move(served.model), std::move(exchange), std::move(request), std::move(response));
}

void OpenAiFrontend::Run(std::shared_ptr<const ModelContext> model,
                         std::shared_ptr<HttpExchange> exchange, OpenAiRequest request,
                         std::unique_ptr<ResponseBuilder> response) {
  {
    absl::MutexLock lock(&mu_);
    ++open_requests_;
  }
  auto generation = std::make_shared<Generation>(this, std::move(model), std::move(exchange),
                                                 std::move(request), std::move(response));
  generation->Start(deps_.open);
}

}  // namespace pagellm
