// Tool calls read out of a model's generated text, for the OpenAI chat API's `tool_calls`.
//
// Three ways a reply becomes calls, one per tool_choice:
//   named ({"type": "function", ...}): the whole reply is the arguments (generated under the
//     function's parameter schema); nothing to parse.
//   "required": the reply is a JSON array of {"name", "parameters"} (generated under
//     RequiredToolsSchema, openai_tools.h); ParseRequiredToolCalls reads it.
//   "auto": the model's own format, which the router is told (--tool-call-parser, vLLM's
//     names): ParseToolCalls reads a whole reply, a ToolCallStreamParser one being streamed.
//       hermes (Qwen2.5/Qwen3, Hermes 2/3, ...): text, then blocks
//         `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`.
//       llama3_json (Llama 3.1-3.3 with their JSON tool prompt): a reply that starts with `{`
//         (or `<|python_tag|>`) is one or more objects `{"name": ..., "parameters": {...}}`
//         ("arguments" too) separated by `;`.
//       mistral (Mistral 7B v0.3, Nemo, Small, Large): text, then [TOOL_CALLS] and a JSON array
//         of {"name", "arguments"} (v3 tokenizers) or `name[ARGS]{...}` per call (v11 and
//         later). [TOOL_CALLS] is a control token: replies must keep special tokens.
// Arguments are re-serialized as Python's json.dumps(value, ensure_ascii=False) writes them
// (PyJsonDumps), as vLLM returns them.
//
// Thread-safe: the functions are pure; a ToolCallStreamParser belongs to one choice of one
// request.
#ifndef PAGELLM_ROUTER_HTTP_TOOL_CALLS_H_
#define PAGELLM_ROUTER_HTTP_TOOL_CALLS_H_

#include <memory>
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

// The formats of --tool-call-parser.
enum class ToolCallFormat { kHermes, kLlama3Json, kMistral };
// "hermes", "llama3_json" or "mistral"; nullopt for another name.
std::optional<ToolCallFormat> ToolCallFormatNamed(std::string_view name);

// A whole reply read in `format`, as vLLM's parser reads it: when it holds no calls, or when
// any of them does not parse, no calls and the text as content. Otherwise the calls, and as
// content the text before the first (nullopt when empty; hermes only, a llama3_json reply with
// calls has none); hermes: a last block may be unclosed, text after a block is dropped.
struct ParsedReply {
  std::optional<std::string> content;
  std::vector<ParsedToolCall> calls;
};
ParsedReply ParseToolCalls(ToolCallFormat format, std::string_view text);

// A reply in one format as it streams. Feed hands out content as soon as it cannot be part of
// a call and each call once it is complete; Finish the rest at the end. Streamed, a hermes
// block that does not parse comes out as content (calls already sent cannot be taken back);
// a llama3_json reply that starts as calls is held to its end, then read as ParseToolCalls
// reads it.
class ToolCallStreamParser {
 public:
  virtual ~ToolCallStreamParser() = default;
  virtual void Feed(std::string_view text, std::string* content,
                    std::vector<ParsedToolCall>* calls) = 0;
  virtual void Finish(std::string* content, std::vector<ParsedToolCall>* calls) = 0;
};
std::unique_ptr<ToolCallStreamParser> NewToolCallStreamParser(ToolCallFormat format);
// A "required" reply as it streams: each call once its element of the array is complete. At
// the end, a reply of which no call was complete and that is not a list of calls is content.
std::unique_ptr<ToolCallStreamParser> NewRequiredStreamParser();

// A new call id: "chatcmpl-tool-" and 32 random hex digits (vLLM's form); for mistral, 9
// random letters and digits (what its templates accept, as vLLM makes them).
std::string NewToolCallId(ToolCallFormat format = ToolCallFormat::kHermes);

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_TOOL_CALLS_H_
