// The OpenAI chat API's tool calling, request side: `tools`, `tool_choice`,
// `parallel_tool_calls` and the tool fields of `messages` (an assistant's `tool_calls` and
// `reasoning`, a tool message's `tool_call_id`, `name`), read into the ChatPrompt the template
// renders and into the structured output that makes the model call a tool, as vLLM does:
//   "none": tools go to the template; the reply is text.
//   "auto" (the default when tools are given): the reply is parsed for calls, which needs a
//     parser for the model's format (the router's --tool-call-parser; the front end refuses
//     "auto" without one, as vLLM does without --enable-auto-tool-choice).
//   named {"type": "function", "function": {"name": N}}: the reply is N's arguments, generated
//     under N's parameter schema.
//   "required": the reply is a JSON array of one or more {"name", "parameters"} calls
//     (RequiredToolsSchema), one at most when parallel_tool_calls is false.
// Errors are InvalidArgument naming the field (json_fields.h), with vLLM's messages where vLLM
// has one.
//
// Thread-safe: pure functions.
#ifndef PAGELLM_ROUTER_HTTP_OPENAI_TOOLS_H_
#define PAGELLM_ROUTER_HTTP_OPENAI_TOOLS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pagellm/v1/generation.pb.h"
#include "router/http/json_fields.h"

namespace pagellm {

struct ToolChoice {
  enum class Mode { kNone, kAuto, kRequired, kNamed };
  Mode mode = Mode::kNone;
  std::string name;                 // kNamed: the function
  bool parallel_tool_calls = true;  // false: at most one call per reply
};

// A message's tool_calls, tool_call_id, name and reasoning (or reasoning_content) (`m` is
// messages[i], `at` its path).
absl::Status ParseMessageToolFields(const openai::Json& m, absl::string_view at,
                                    v1::ChatMessage* out);

// tools, tool_choice and parallel_tool_calls of the request body `j`: the tools into
// chat->tools, the constraint of a named or "required" choice into s->structured_output
// (InvalidArgument if the request gives a structured output of its own too).
absl::StatusOr<ToolChoice> ParseTools(const openai::Json& j, v1::ChatPrompt* chat,
                                      v1::SamplingParams* s);

// The JSON Schema of a "required" reply: an array of 1 (to `max_calls`, 0: any number)
// objects {"name": one of the tools' names, "parameters": that tool's schema}, each tool's
// "$defs" moved to the top (InvalidArgument when two tools define one name differently).
absl::StatusOr<std::string> RequiredToolsSchema(const v1::ChatPrompt& chat, int max_calls);

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_OPENAI_TOOLS_H_
