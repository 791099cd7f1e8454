// Tool calls read out of a model's generated text, for the OpenAI chat API's `tool_calls`.
//
// Three ways a reply becomes calls, one per tool_choice:
//   named ({"type": "function", ...}): the whole reply is the arguments (generated under the
//     function's parameter schema); nothing to parse.
//   "required": the reply is a JSON array of {"name", "parameters"} (generated under
//     RequiredToolsSchema, openai_tools.h); ParseRequiredToolCalls reads it.
//   "auto" with the hermes parser (Qwen2.5, Hermes 2/3, ...: vLLM's `--tool-call-parser hermes`):
//     the model writes `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks after
//     optional text; ParseHermesToolCalls reads a whole reply, HermesStreamParser one being
//     streamed.
// Arguments are re-serialized as Python's json.dumps(value, ensure_ascii=False) writes them
// (PyJsonDumps), as vLLM returns them.
//
// Thread-safe: the functions are pure; a HermesStreamParser belongs to one choice of one
// request.
#ifndef PAGELLM_ROUTER_HTTP_TOOL_CALLS_H_
#define PAGELLM_ROUTER_HTTP_TOOL_CALLS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace pagellm {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text
  bool operator==(const ParsedToolCall&) const = default;
};

// Python's json.dumps(j, ensure_ascii=False): separators ", " and ": ", non-ASCII kept.
std::string PyJsonDumps(const nlohmann::ordered_json& j);

// The calls of a "required" reply: a JSON array of objects with a string "name" and a
// "parameters" value. nullopt when the text is not such an array (a reply cut short by
// max_tokens).
std::optional<std::vector<ParsedToolCall>> ParseRequiredToolCalls(std::string_view text);

inline constexpr std::string_view kHermesOpen = "<tool_call>";
inline constexpr std::string_view kHermesClose = "</tool_call>";

// A whole hermes reply, as vLLM's hermes parser reads it: without `<tool_call>`, or when any
// block is not a JSON object with a string "name" and "arguments", no calls and the text as
// content. Otherwise the calls (a last block may be unclosed) and, as content, the text before
// the first block (nullopt when empty); text after a block is dropped.
struct HermesReply {
  std::optional<std::string> content;
  std::vector<ParsedToolCall> calls;
};
HermesReply ParseHermesToolCalls(std::string_view text);

// A hermes reply as it streams. Feed hands out content as soon as it cannot be the start of a
// `<tool_call>` and each call when its block closes; Finish the rest at the end. Streamed, a
// block that does not parse comes out as content (calls already sent cannot be taken back), and
// text between or after blocks is dropped, as in ParseHermesToolCalls.
class HermesStreamParser {
 public:
  void Feed(std::string_view text, std::string* content, std::vector<ParsedToolCall>* calls);
  void Finish(std::string* content, std::vector<ParsedToolCall>* calls);

 private:
  void Drain(bool at_end, std::string* content, std::vector<ParsedToolCall>* calls);

  std::string pending_;     // text not yet handed out
  bool in_call_ = false;    // pending_ is inside a block (after its `<tool_call>`)
  bool seen_call_ = false;  // a block has started: later text outside blocks is dropped
};

// A new call id: "chatcmpl-tool-" and 32 random hex digits (vLLM's form).
std::string NewToolCallId();

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_TOOL_CALLS_H_
