// ReadToolReply: a finished chat reply read as the tool calls its request's tool_choice asks
// for (chat's choices, the Responses API's function_call items).
//
// Thread-safe: a pure function.
#ifndef PAGELLM_ROUTER_HTTP_TOOL_REPLY_H_
#define PAGELLM_ROUTER_HTTP_TOOL_REPLY_H_

#include <optional>
#include <string>
#include <vector>

#include "router/http/openai_tools.h"
#include "router/http/tool_calls.h"

namespace pagellm {

// A finished reply read as tool calls under `choice` (its content alone for kNone): the named
// function's arguments, a "required" list (content when it is not one: cut short), or the
// model's own format (`format`, "auto"); at most one call without parallel_tool_calls.
struct ToolReply {
  std::optional<std::string> content;
  std::vector<ParsedToolCall> calls;
};
ToolReply ReadToolReply(const ToolChoice& choice, ToolCallFormat format, const std::string& text);

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_TOOL_REPLY_H_
