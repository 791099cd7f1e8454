#include "common/chat_template/chat_template.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/chat_template/ast.h"
#include "common/chat_template/builtins.h"
#include "common/chat_template/interpreter.h"
#include "common/chat_template/lexer.h"
#include "common/chat_template/parser.h"
#include "common/chat_template/render_context.h"
#include "common/chat_template/template_kwargs.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pagellm {

using chat_template::DictObject;
using chat_template::Value;

struct ChatTemplate::Impl {
  chat_template::Body body;
};

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::~ChatTemplate() = default;

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Parse(
    std::string_view source, const chat_template::ParseOptions& options) {
  if (source.size() > options.max_source_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("chat template of ", source.size(),
                                                   " bytes exceeds the limit of ",
                                                   options.max_source_bytes));
  }
  if (!IsValidUtf8(source)) return absl::InvalidArgumentError("chat template is not valid UTF-8");
  ASSIGN_OR_RETURN(std::vector<chat_template::Token> tokens,
                   chat_template::Tokenize(source, options));
  auto impl = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(impl->body, chat_template::ParseTemplate(tokens, options));
  return std::unique_ptr<ChatTemplate>(new ChatTemplate(std::move(impl)));
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 const RenderOptions& options) const {
  chat_template::RenderContext ctx(options.limits, options.now.value_or(absl::Now()),
                                   options.time_zone);
  std::vector<Value> list;
  list.reserve(messages.size());
  for (const ChatMessage& message : messages) {
    Value dict = ctx.MakeDict();
    DictObject* d = dict.AsDict();
    d->Set(Value::String("role"), Value::String(SanitizeUtf8(message.role)));
    d->Set(Value::String("content"), Value::String(SanitizeUtf8(message.content)));
    if (message.reasoning.has_value()) {
      const Value reasoning = Value::String(SanitizeUtf8(*message.reasoning));
      d->Set(Value::String("reasoning"), reasoning);
      d->Set(Value::String("reasoning_content"), reasoning);
    }
    if (!message.tool_calls_json.empty()) {
      ASSIGN_OR_RETURN(Value calls, chat_template::ParseJsonValue(message.tool_calls_json,
                                                                  "a message's tool_calls", ctx));
      d->Set(Value::String("tool_calls"), std::move(calls));
    }
    if (message.tool_call_id.has_value()) {
      d->Set(Value::String("tool_call_id"), Value::String(SanitizeUtf8(*message.tool_call_id)));
    }
    if (message.name.has_value()) {
      d->Set(Value::String("name"), Value::String(SanitizeUtf8(*message.name)));
    }
    list.push_back(dict);
  }
  ASSIGN_OR_RETURN(Value messages_value, ctx.MakeList(std::move(list)));
  Value tools = Value::None();
  if (!options.tools_json.empty()) {
    ASSIGN_OR_RETURN(tools, chat_template::ParseJsonValue(options.tools_json, "tools", ctx));
  }
  std::vector<std::pair<std::string, Value>> globals = {
      {"messages", messages_value},
      {"add_generation_prompt", Value::Bool(options.add_generation_prompt)},
      {"bos_token", Value::String(SanitizeUtf8(options.bos_token))},
      {"eos_token", Value::String(SanitizeUtf8(options.eos_token))},
      {"tools", tools},
      {"documents", Value::None()},
  };
  // transformers passes the tokenizer's special_tokens_map: only the tokens it has.
  if (!options.unk_token.empty()) {
    globals.emplace_back("unk_token", Value::String(SanitizeUtf8(options.unk_token)));
  }
  if (!options.pad_token.empty()) {
    globals.emplace_back("pad_token", Value::String(SanitizeUtf8(options.pad_token)));
  }
  if (!options.template_kwargs_json.empty()) {
    RETURN_IF_ERROR(chat_template::AddTemplateKwargs(options.template_kwargs_json, ctx, &globals));
  }
  std::string out;
  RETURN_IF_ERROR(chat_template::RenderBody(impl_->body, globals, ctx, &out));
  return out;
}

bool ChatTemplate::IsRaisedByTemplate(const absl::Status& status) {
  return status.GetPayload(chat_template::kRaisedByTemplatePayload).has_value();
}

}  // namespace pagellm
