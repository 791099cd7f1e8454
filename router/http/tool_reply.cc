#include "router/http/tool_reply.h"

#include <utility>

namespace pagellm {

ToolReply ReadToolReply(const ToolChoice& choice, ToolCallFormat format, const std::string& text) {
  ToolReply reply;
  switch (choice.mode) {
    case ToolChoice::Mode::kNamed:
      reply.calls.push_back({choice.name, text});
      break;
    case ToolChoice::Mode::kRequired:
      if (auto calls = ParseRequiredToolCalls(text)) {
        reply.calls = *std::move(calls);
      } else {
        reply.content = text;  // not a list of calls: cut short
      }
      break;
    case ToolChoice::Mode::kAuto: {
      ParsedReply parsed = ParseToolCalls(format, text);
      reply.content = std::move(parsed.content);
      reply.calls = std::move(parsed.calls);
      break;
    }
    case ToolChoice::Mode::kNone:
      reply.content = text;
      break;
  }
  if (!choice.parallel_tool_calls && reply.calls.size() > 1) reply.calls.resize(1);
  return reply;
}

}  // namespace pagellm
