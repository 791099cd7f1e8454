// ChatRenderer over common/chat_template's ChatTemplate. Tools and tool calls reach the template
// as vLLM passes them: tools as {"type": "function", "function": {"name", "description",
// "parameters"[, "strict"]}} (a missing description or schema as none), an assistant's calls as
// {"id", "type": "function", "function": {"name", "arguments"}} with the arguments parsed into
// the JSON value they spell (an empty string as {}).
#include "router/chat_renderer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/api/request_limits.h"
#include "common/chat_template/chat_template.h"
#include "common/json/strict_json.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;

std::string Dump(const Json& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

absl::StatusOr<Json> ParseField(const std::string& text, const std::string& field) {
  absl::StatusOr<Json> j = ParseStrictJson(text, {.max_depth = kMaxToolJsonDepth});
  if (!j.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is not valid JSON: ", j.status().message()));
  }
  return j;
}

absl::StatusOr<std::string> ToolsJson(const v1::ChatPrompt& chat) {
  if (chat.tools_size() == 0) return std::string();
  Json tools = Json::array();
  for (int i = 0; i < chat.tools_size(); ++i) {
    const v1::Tool& t = chat.tools(i);
    Json function;
    function["name"] = t.name();
    function["description"] = t.has_description() ? Json(t.description()) : Json(nullptr);
    if (t.parameters().empty()) {
      function["parameters"] = nullptr;
    } else {
      ASSIGN_OR_RETURN(function["parameters"],
                       ParseField(t.parameters(), absl::StrCat("tools[", i, "].parameters")));
    }
    if (t.has_strict()) function["strict"] = t.strict();
    tools.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return Dump(tools);
}

absl::StatusOr<std::string> ToolCallsJson(const v1::ChatMessage& m, int index) {
  if (m.tool_calls_size() == 0) return std::string();
  Json calls = Json::array();
  for (int i = 0; i < m.tool_calls_size(); ++i) {
    const v1::ToolCall& c = m.tool_calls(i);
    Json arguments = Json::object();
    if (!c.arguments().empty()) {
      ASSIGN_OR_RETURN(
          arguments, ParseField(c.arguments(), absl::StrCat("messages[", index, "].tool_calls[", i,
                                                            "].function.arguments")));
    }
    calls.push_back({{"id", c.id()},
                     {"type", "function"},
                     {"function", {{"name", c.name()}, {"arguments", std::move(arguments)}}}});
  }
  return Dump(calls);
}

class TemplateRenderer final : public ChatRenderer {
 public:
  TemplateRenderer(std::unique_ptr<ChatTemplate> tmpl, v1::SpecialTokens tokens)
      : template_(std::move(tmpl)), tokens_(std::move(tokens)) {}

  absl::StatusOr<std::string> Render(const v1::ChatPrompt& chat) const override {
    std::vector<ChatMessage> messages;
    messages.reserve(chat.messages_size());
    for (int i = 0; i < chat.messages_size(); ++i) {
      const v1::ChatMessage& m = chat.messages(i);
      // Any role: the template decides (developer, ipython, function, ...), as in transformers.
      ChatMessage message{m.role(), m.content()};
      ASSIGN_OR_RETURN(message.tool_calls_json, ToolCallsJson(m, i));
      if (m.has_reasoning()) message.reasoning = m.reasoning();
      if (m.has_tool_call_id()) message.tool_call_id = m.tool_call_id();
      if (m.has_name()) message.name = m.name();
      messages.push_back(std::move(message));
    }
    RenderOptions options;
    options.add_generation_prompt =
        chat.has_add_generation_prompt() ? chat.add_generation_prompt() : true;
    options.bos_token = tokens_.bos_token();
    options.eos_token = tokens_.eos_token();
    options.unk_token = tokens_.unk_token();
    options.pad_token = tokens_.pad_token();
    options.template_kwargs_json = chat.chat_template_kwargs();
    ASSIGN_OR_RETURN(options.tools_json, ToolsJson(chat));
    // Errors are InvalidArgument already: exactly the template's raise_exception message for a
    // conversation it rejects, "chat template error, line N: ..." otherwise.
    return template_->Render(messages, options);
  }

 private:
  std::unique_ptr<ChatTemplate> template_;
  const v1::SpecialTokens tokens_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ChatRenderer>> ChatRenderer::Create(std::string_view source,
                                                                   v1::SpecialTokens tokens) {
  auto tmpl = ChatTemplate::Parse(source);
  if (!tmpl.ok()) return tmpl.status();
  return std::unique_ptr<ChatRenderer>(new TemplateRenderer(*std::move(tmpl), std::move(tokens)));
}

}  // namespace pagellm
