// OpenAiFrontend: the OpenAI-compatible HTTP API of the router, an HttpHandler.
//
//   POST /v1/completions        POST /v1/chat/completions   (JSON or server-sent events)
//   POST /v1/responses          (the Responses API for text: responses_api.h)
//   POST /v1/embeddings         (the prompt's last hidden state, normalized: vLLM's pooling)
//   POST /v1/score, /v1/rerank  (vLLM's; also /score, /rerank: cosines of the embeddings)
//   GET  /v1/models             GET  /health                GET /version
//   POST /v1/load_lora_adapter, /v1/unload_lora_adapter (vLLM's runtime LoRA updating; 404 unless
//        the router runs with it, Deps::change_adapters)
//
// /v1/*, /tokenize, /detokenize, /score and /rerank need an accepted API key when keys are
// configured (401 before the body is looked at);
// /health and /version stay open for probes. The header is passed on to the gRPC calls.
//
// A generation request becomes one RoutedStream per prompt, opened in-process on the router's
// Generation service (no second gRPC hop): the same validation, admission queue, worker choice
// and streaming as gRPC clients get, and the same status codes, which map to HTTP ones
// (HttpStatusFor) in an OpenAI error object. Streams are flow-controlled end to end: a stream
// delivers its next message only once the client has taken the last chunk. A client that
// disconnects cancels its streams (the worker frees their blocks at its next step).
//
// Thread-safe; Handle never blocks. Streams run on gRPC's and the HTTP server's threads.
#ifndef PAGELLM_ROUTER_HTTP_OPENAI_FRONTEND_H_
#define PAGELLM_ROUTER_HTTP_OPENAI_FRONTEND_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pagellm/v1/generation.pb.h"
#include "router/http/adapters_on_demand.h"
#include "router/http/http_server.h"
#include "router/http/openai_request.h"
#include "router/http/reasoning.h"
#include "router/http/response_builder.h"
#include "router/http/tool_calls.h"
#include "router/model_context.h"
#include "router/routed_stream.h"

namespace pagellm {

class OpenAiFrontend final : public HttpHandler {
 public:
  struct Options {
    std::string served_model_name;  // the `model` clients name; empty: the workers' model name
    std::string version;            // GET /version
    // How tool_choice "auto" replies are read for calls (tool_calls.h). None: "auto" is refused
    // with 400, as vLLM refuses it without --tool-call-parser.
    std::optional<ToolCallFormat> tool_call_format;
    // How chat replies are split into reasoning and answer (reasoning.h); none: not split.
    // Replies under a structured output (a named or "required" tool choice too) are not split.
    std::optional<ReasoningFormat> reasoning_format;
    // A request naming a model that is neither served nor a served adapter loads the adapter
    // of that name from the workers' --lora-dir first (AdaptersOnDemand; needs
    // Deps::change_adapters), as vLLM's lora_filesystem_resolver does.
    bool load_adapters_on_demand = false;
  };
  // Opens a stream on the router's Generation service (GenerationService::Open), not started.
  using OpenStream = std::function<absl::StatusOr<std::unique_ptr<RoutedStream>>(
      const v1::GenerateRequest& request, absl::Time client_deadline,
      RoutedStream::Client* client)>;
  struct Deps {
    OpenStream open;
    // The served model; null until the router has reached a worker.
    std::function<std::shared_ptr<const ModelContext>()> model;
    std::function<bool()> serving;  // GET /health: 200 when true, 503 otherwise
    // Whether an Authorization header value may use /v1/* (401 otherwise). Null: open.
    std::function<bool(std::string_view authorization)> authorized;
    // The LoRA adapters the workers serve now (WorkerPool::ServedAdapters): what /v1/models
    // lists and a request's "model" may name. Null: the model's (ModelInfo.lora_adapters).
    std::function<std::vector<std::string>()> adapters;
    // Applies a runtime LoRA change on the workers (ChangeWorkerAdapters); `done` gets the
    // outcome, once, on any thread. Null: runtime updating is off.
    std::function<void(const LoraChangeRequest& change, std::function<void(absl::Status)> done)>
        change_adapters;
  };

  OpenAiFrontend(Options options, Deps deps);
  OpenAiFrontend(const OpenAiFrontend&) = delete;
  OpenAiFrontend& operator=(const OpenAiFrontend&) = delete;

  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override;

  // Requests whose gRPC calls are not all over.
  [[nodiscard]] int open_requests() const;
  // Blocks until open_requests() is 0 or `deadline`; true when it is 0.
  bool WaitForRequests(absl::Time deadline);

 private:
  class Generation;
  // What a request's "model" names. `model` null when there is none to serve it: no worker
  // reached yet (503) or a model neither served nor an adapter (404), already replied.
  struct Served {
    std::shared_ptr<const ModelContext> model;
    std::string name;     // the served model's name
    std::string adapter;  // the LoRA adapter named; "" for the base model
  };
  // With `retry` (and Options::load_adapters_on_demand), a name no worker serves is loaded as
  // an adapter first and what `retry` makes runs once it is served (nothing is replied yet);
  // else 404.
  Served Resolve(const std::string& asked, const std::shared_ptr<HttpExchange>& exchange,
                 const std::function<std::function<void()>()>& retry);
  // `on_demand`: Resolve may load the adapter the request names (not again after that load).
  void Generate(const HttpRequest& request, bool chat, std::shared_ptr<HttpExchange> exchange,
                bool on_demand = true);
  // The format a chat request's tool calls are read in: --tool-call-parser's (hermes when none
  // is set); InvalidArgument for "auto" without one. A mistral "auto" reply keeps special tokens.
  absl::StatusOr<ToolCallFormat> ToolFormatFor(OpenAiRequest& request) const;
  // Whether a reply to chat request `chat` is split into reasoning and answer (--reasoning-parser;
  // not under a structured output, not with thinking turned off).
  bool SplitsReasoning(const v1::GenerateRequest& chat) const;
  // POST /v1/responses: a chat request answered as a Response object (responses_api.h).
  void Respond(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange,
               bool on_demand = true);
  // POST /v1/embeddings, or vLLM's /v1/score and /v1/rerank over the texts' embeddings.
  enum class EmbedRoute { kEmbeddings, kScore, kRerank };
  void Embed(const HttpRequest& request, EmbedRoute route, std::shared_ptr<HttpExchange> exchange,
             bool on_demand = true);
  // Loads adapter `asked` (AdaptersOnDemand), then runs `retry` if the workers serve it, or
  // answers 404 (none has it) or the load's error. Counted as an open request meanwhile.
  void LoadThenRetry(const std::string& asked, std::shared_ptr<HttpExchange> exchange,
                     std::function<void()> retry);
  // Starts the request's streams, which feed `response`.
  void Run(std::shared_ptr<const ModelContext> model, std::shared_ptr<HttpExchange> exchange,
           OpenAiRequest request, std::unique_ptr<ResponseBuilder> response);
  // POST /tokenize (tokenize) or /detokenize: answered here, from the router's tokenizer.
  void Tokenize(const HttpRequest& request, bool tokenize, HttpExchange& exchange);
  void RequestDone();
  // The adapters a request's "model" may name (Deps::adapters).
  [[nodiscard]] std::vector<std::string> Adapters(const ModelContext& model) const;
  // POST /v1/load_lora_adapter (load) or /v1/unload_lora_adapter: counted as an open request
  // until the workers have answered.
  void ChangeAdapters(const HttpRequest& request, bool load,
                      std::shared_ptr<HttpExchange> exchange);

  const Options options_;
  const Deps deps_;
  std::unique_ptr<AdaptersOnDemand> on_demand_;  // null unless Options::load_adapters_on_demand
  mutable absl::Mutex mu_;
  int open_requests_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_OPENAI_FRONTEND_H_
