// OpenAiResponse: the OpenAI-format answer of one /v1/completions or /v1/chat/completions
// request, built from the router's GenerateResponse messages of each of its prompts.
//
// Streaming: AppendStart once, Append per message, AppendEnd; each appends server-sent events
// ("data: {...}\n\n"; AppendEnd the usage chunk when asked, then "data: [DONE]\n\n").
// Otherwise: Append per message (accumulated), then Body() once every prompt is done.
// Choice i of prompt p has index p * n + i. Token strings (logprobs) are the tokenizer's pieces.
//
// Not thread-safe: one request's messages are given in order by one caller at a time.
#ifndef PAGELLM_ROUTER_HTTP_OPENAI_RESPONSE_H_
#define PAGELLM_ROUTER_HTTP_OPENAI_RESPONSE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "pagellm/v1/generation.pb.h"
#include "router/http/openai_request.h"
#include "router/http/reasoning.h"
#include "router/http/response_builder.h"
#include "router/http/tool_calls.h"
#include "router/http/tool_reply.h"

namespace pagellm {

class OpenAiResponse final : public ResponseBuilder {
 public:
  struct Config {
    OpenAiRequest::Kind kind = OpenAiRequest::Kind::kCompletion;
    std::string id;       // "cmpl-..." / "chatcmpl-..."
    int64_t created = 0;  // Unix seconds
    std::string model;    // the served model name
    int prompts = 1;
    int n = 1;
    std::optional<int> logprobs;  // as in OpenAiRequest
    bool include_usage = false;
    // echo: per prompt, the text that starts each of its choices (empty: no echo).
    std::vector<std::string> echo;
    bool echo_logprobs = false;  // as in OpenAiRequest
    bool echo_only = false;
    std::optional<int> prompt_logprobs;
    bool return_token_ids = false;  // as in OpenAiRequest
    // Chat: how replies become tool calls (tool_calls.h). Named: the reply is the arguments of
    // one call. "required": a JSON array of calls (each streamed once complete). "auto": the
    // calls of `tool_format`. A reply with calls has content null and finish_reason "tool_calls"
    // (unless cut short: "length"); one that does not parse comes back as content.
    ToolChoice tool_choice;
    ToolCallFormat tool_format = ToolCallFormat::kHermes;
    // Chat: the reasoning (<think>) is split from the answer (reasoning.h) and returned as the
    // message's `reasoning` and `reasoning_content`; tool calls are read from the answer.
    bool reasoning = false;
    // Makes the ids of tool calls; null: NewToolCallId (tests inject fixed ids).
    std::function<std::string()> tool_call_id;
  };

  // `tokenizer` is borrowed and must outlive the response.
  OpenAiResponse(Config config, const Tokenizer* tokenizer);

  void AppendStart(std::string* out) override;
  void Append(int prompt, const v1::GenerateResponse& response, std::string* out) override;
  // Forgets what was appended for `prompt` (not streamed: it starts over).
  void Reset(int prompt) override;
  // The OpenAI error object as an event ("data: {"error": ...}").
  void AppendError(const absl::Status& status, std::string* out) override;
  void AppendEnd(std::string* out) override;
  // The non-streamed answer.
  [[nodiscard]] std::string Body() const override;

 private:
  // What the worker reported about one prompt (SamplingParams.prompt_logprobs).
  struct Prompt {
    std::vector<int32_t> ids;
    std::vector<v1::TokenLogprob> logprobs;  // of ids[1], ids[2], ...
    bool ids_streamed = false;               // chat, return_token_ids: sent in a chunk
  };
  struct Choice {
    std::string text;
    std::string finish_reason;  // empty while running
    // Non-streamed logprobs, accumulated.
    std::vector<v1::TokenLogprob> logprobs;
    int64_t text_offset = 0;  // completions: where the next token's text starts
    bool echoed = false;
    // return_token_ids: the generated ids so far, of which the first `ids_streamed` were sent
    // (streamed; the prompt's ids go with the choice's first chunk, completions).
    std::vector<int32_t> token_ids;
    size_t ids_streamed = 0;
    bool prompt_ids_streamed = false;
    // Streamed tool calls: the calls sent so far (named: 1 once its first chunk is out) and the
    // parser of a "required" or "auto" reply (made at its first delta).
    int calls_sent = 0;
    std::unique_ptr<ToolCallStreamParser> parser;
    std::unique_ptr<ReasoningStreamSplitter> splitter;  // streamed with a reasoning format
  };
  // Streams delta `d` of choice `index` when tool calls are on: tool-call or content chunks, the
  // last with the finish reason and `d`'s logprobs.
  void AppendToolChunks(int index, std::string_view text, const v1::SampleDelta& d,
                        std::string* out);
  // {"index": k, "id", "type": "function", "function": {"name", "arguments"}}.
  [[nodiscard]] nlohmann::ordered_json CallJson(int k, const ParsedToolCall& call) const;
  // "tool_calls" for a reply that stopped with calls; the engine's reason otherwise.
  static std::string FinishWithCalls(const std::string& finish_reason, bool has_calls);

  // One streamed chunk for `delta` of choice `index`; `lead` (echo with logprobs, the choice's
  // first chunk) puts the prompt's tokens before the delta's in its logprobs.
  void AppendChunk(int index, std::string_view text, const v1::SampleDelta* delta,
                   const Prompt* lead, std::string* out);
  // A chat chunk with `delta` (a JSON object), logprobs from `logprobs` (may be null) and
  // finish_reason `finish` (null when empty).
  void AppendDeltaChunk(int index, const nlohmann::ordered_json& delta,
                        const v1::SampleDelta* logprobs, std::string_view finish, std::string* out);
  [[nodiscard]] std::string MakePrefix() const;
  // return_token_ids, streamed: the choice-level fields of choice `index`'s next chunk
  // (",\"token_ids\":[...]" with the ids not sent yet, and on a completion choice's first chunk
  // ",\"prompt_token_ids\":[...]"), marked sent; and the chunk-level one of a chat response's
  // first chunk after the prompt's ids came. Empty when not asked for.
  std::string TakeChoiceIds(int index);
  std::string TakeChatPromptIds(int index);

  const Config config_;
  const Tokenizer* const tokenizer_;
  // The fields every chunk starts with, less the closing brace; built once.
  const std::string prefix_;
  std::vector<Choice> choices_;
  std::vector<Prompt> prompt_info_;  // per prompt
  int64_t prompt_tokens_ = 0;
  int64_t completion_tokens_ = 0;
};

// The OpenAI error object: {"error": {"message", "type", "param", "code"}}.
std::string OpenAiErrorBody(int http_status, std::string_view message, std::string_view param,
                            std::string_view code);
// The HTTP status for a gRPC-style status code (400, 401, 404, 413, 429, 503, 504, ...).
int HttpStatusFor(absl::StatusCode code);
// The OpenAI error body for `status`; its param payload (OpenAiParam) when it has one.
std::string OpenAiErrorBody(const absl::Status& status);

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_OPENAI_RESPONSE_H_
