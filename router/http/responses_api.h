// The OpenAI Responses API (POST /v1/responses), as vLLM serves it, for text: a request is read
// as the chat request it amounts to, and its answer is written as a Response object (or, with
// "stream": true, as the Responses API's named server-sent events).
//
// Request (ParseResponsesRequest): `input` is a string (one user message) or a list of message
// items ({"role", "content"}, content a string or input_text / output_text parts); `instructions`
// becomes a system message first; `max_output_tokens`, `temperature`, `top_p`, `stream`, `text`
// (its `format`: text, json_object, json_schema), `user`, `metadata`, `store` and vLLM's extra
// sampling fields (top_k, min_p, seed, stop, ...) mean what they mean in chat. What pagellm does
// not serve here is refused by name with InvalidArgument: hosted tools (web search, files, MCP,
// ...), previous_response_id (no response is stored), background, reasoning, images, files.
//
// Response (ResponsesResponse): one assistant message of output_text; status "completed", or
// "incomplete" with incomplete_details.reason "max_output_tokens" when the length limit ended it;
// usage as input_tokens / output_tokens. Streamed: response.created, response.in_progress,
// response.output_item.added, response.content_part.added, response.output_text.delta per
// message with text, then the .done events and response.completed (or response.incomplete), each
// "event: TYPE\ndata: JSON" with a sequence_number; a failure ends the stream with "error" and
// response.failed. No "[DONE]" (the Responses API sends none).
//
// Function tools: `tools` ({"type": "function", "name", "parameters", ...}) and `tool_choice`
// become chat's; function_call and function_call_output input items become an assistant
// message's tool_calls and tool messages. The reply is read as chat reads it (ReadToolReply: the
// router's --tool-call-parser for "auto"): its text before the calls, if any, is a message item,
// then one function_call item per call ({"id": "fc_...", "call_id", "name", "arguments"}).
// Streamed, the items come whole at the end (output_text.delta or function_call_arguments.delta
// once each), as a call is known only once it is complete.
//
// Reasoning models (the router's --reasoning-parser): the reasoning is a reasoning item first
// (Config::reasoning). Reasoning items a client sends back in `input` become the `reasoning` of
// the assistant message that follows them, as chat's assistant messages carry it.
//
// Thread-safety: ParseResponsesRequest is a pure function; a ResponsesResponse is used by one
// caller at a time (ResponseBuilder).
#ifndef PAGELLM_ROUTER_HTTP_RESPONSES_API_H_
#define PAGELLM_ROUTER_HTTP_RESPONSES_API_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "router/http/openai_request.h"
#include "router/http/response_builder.h"
#include "router/http/tool_reply.h"

namespace pagellm {

// Items one `input` list may hold.
inline constexpr int kMaxResponsesInputItems = 1024;

struct ResponsesRequest {
  OpenAiRequest chat;  // kind kChat, one prompt
  // Echoed in the Response object.
  std::optional<std::string> instructions;
  std::optional<int32_t> max_output_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  nlohmann::ordered_json text_format = {{"type", "text"}};  // text.format as given
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as given
  nlohmann::ordered_json tool_choice = "auto";                     // as given
};

// InvalidArgument (with the param payload) for a body that is not a Responses request pagellm
// serves; otherwise the chat request it amounts to, parsed as /v1/chat/completions parses one.
absl::StatusOr<ResponsesRequest> ParseResponsesRequest(std::string_view body);

class ResponsesResponse final : public ResponseBuilder {
 public:
  struct Config {
    std::string id;       // "resp_..."
    std::string item_id;  // "msg_..."
    int64_t created_at = 0;
    std::string model;
    bool stream = false;
    ResponsesRequest echo;  // the request's fields the Response object repeats (chat unused)
    // Tools (echo.chat.tool_choice not none): the reply is read as calls once it is whole
    // (ReadToolReply), so a stream sends its items at the end.
    ToolCallFormat tool_format = ToolCallFormat::kHermes;
    std::function<std::string()> call_id;  // call_ids (null: NewToolCallId(tool_format))
    // The router's --reasoning-parser applies (as in chat): the reply's reasoning is a reasoning
    // item ({"type": "reasoning", "content": [{"type": "reasoning_text", ...}]}) before the
    // rest, and a stream sends its items at the end.
    bool reasoning = false;
  };
  explicit ResponsesResponse(Config config) : config_(std::move(config)) {}

  void AppendStart(std::string* out) override;
  void Append(int prompt, const v1::GenerateResponse& response, std::string* out) override;
  void Reset(int prompt) override;
  void AppendError(const absl::Status& status, std::string* out) override;
  void AppendEnd(std::string* out) override;
  [[nodiscard]] std::string Body() const override;

 private:
  // The Response object with `output` (the items; none while "in_progress").
  [[nodiscard]] nlohmann::ordered_json Object(std::string_view status,
                                              nlohmann::ordered_json output) const;
  // The finished reply's output items: the message, and with tools the calls it makes.
  [[nodiscard]] nlohmann::ordered_json Items(std::string_view status) const;
  [[nodiscard]] nlohmann::ordered_json Message(std::string_view status,
                                               const std::string& text) const;
  void Event(std::string_view type, nlohmann::ordered_json data, std::string* out);
  // The events of item `index` whole (added, its content or arguments, done).
  void ItemEvents(int index, const nlohmann::ordered_json& item, std::string* out);
  [[nodiscard]] bool tools() const {
    return config_.echo.chat.tool_choice.mode != ToolChoice::Mode::kNone;
  }
  // Items come whole at the end: they depend on the whole reply.
  [[nodiscard]] bool buffered() const { return tools() || config_.reasoning; }
  // What follows "resp_" in the id, for the items' ids.
  [[nodiscard]] std::string IdSuffix() const {
    return config_.id.substr(std::min<size_t>(5, config_.id.size()));
  }
  [[nodiscard]] const char* FinalStatus() const { return length_ ? "incomplete" : "completed"; }

  const Config config_;
  std::string text_;
  int64_t input_tokens_ = 0;
  int64_t output_tokens_ = 0;
  bool length_ = false;  // the length limit ended it
  bool failed_ = false;  // AppendError was called
  int64_t sequence_ = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_RESPONSES_API_H_
