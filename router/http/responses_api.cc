#include "router/http/responses_api.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/json/strict_json.h"
#include "common/status_macros.h"
#include "router/http/json_fields.h"
#include "router/http/reasoning.h"

namespace pagellm {
namespace {

using openai::CheckKnownFields;
using openai::Error;
using openai::Field;
using openai::FieldSet;
using openai::Json;
using openai::WrongType;

// Fields that mean in a Responses request what they mean in a chat request (vLLM's extras).
constexpr const char* kChatFields =
    "model temperature top_p stream user top_k min_p repetition_penalty presence_penalty "
    "frequency_penalty seed min_tokens ignore_eos stop stop_token_ids skip_special_tokens "
    "include_stop_str_in_output priority logit_bias parallel_tool_calls cache_salt";

// OpenAI's bounds on `metadata`.
constexpr size_t kMaxMetadataEntries = 16;
constexpr size_t kMaxMetadataKeyBytes = 64;
constexpr size_t kMaxMetadataValueBytes = 512;

// One content part of an input message, as a chat content part.
absl::StatusOr<Json> ChatPart(const Json& part, const std::string& at) {
  if (!part.is_object()) return WrongType(at, part, "an object");
  const Json* type = Field(part, "type");
  if (type == nullptr || !type->is_string()) {
    return Error(absl::StrCat(at, ".type"), absl::StrCat(at, ".type must be a string"));
  }
  const std::string& t = type->get_ref<const std::string&>();
  if (t != "input_text" && t != "output_text") {
    return Error(absl::StrCat(at, ".type"),
                 absl::StrCat("content part type '", t.substr(0, 64),
                              "' is not supported: pagellm serves input_text and output_text"));
  }
  RETURN_IF_ERROR(CheckKnownFields(part, FieldSet({"type text annotations logprobs"}), at));
  const Json* text = Field(part, "text");
  if (text == nullptr || !text->is_string()) {
    return Error(absl::StrCat(at, ".text"), absl::StrCat(at, ".text must be a string"));
  }
  return Json{{"type", "text"}, {"text", *text}};
}

// A string field of an input item, required.
absl::StatusOr<std::string> ItemString(const Json& item, const char* name, const std::string& at) {
  const Json* v = Field(item, name);
  if (v == nullptr || !v->is_string()) {
    return Error(absl::StrCat(at, ".", name), absl::StrCat(at, ".", name, " must be a string"));
  }
  return v->get<std::string>();
}

// A function_call item (a call the model made earlier) as one of the tool_calls of an assistant
// message: the last message when it is the assistant's calls already, else a new one.
absl::Status AddFunctionCall(const Json& item, const std::string& at, bool append, Json* messages) {
  RETURN_IF_ERROR(CheckKnownFields(item, FieldSet({"type id call_id name arguments status"}), at));
  ASSIGN_OR_RETURN(std::string call_id, ItemString(item, "call_id", at));
  ASSIGN_OR_RETURN(std::string name, ItemString(item, "name", at));
  ASSIGN_OR_RETURN(std::string arguments, ItemString(item, "arguments", at));
  Json call = {{"id", std::move(call_id)},
               {"type", "function"},
               {"function", {{"name", std::move(name)}, {"arguments", std::move(arguments)}}}};
  if (append) {
    messages->back()["tool_calls"].push_back(std::move(call));
  } else {
    messages->push_back(
        {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array({call})}});
  }
  return absl::OkStatus();
}

// A reasoning item's text: its reasoning_text parts (else its summary), joined.
absl::StatusOr<std::string> ReasoningText(const Json& item, const std::string& at) {
  RETURN_IF_ERROR(
      CheckKnownFields(item, FieldSet({"type id summary content encrypted_content status"}), at));
  if (Field(item, "encrypted_content") != nullptr) {
    return Error(absl::StrCat(at, ".encrypted_content"),
                 "encrypted_content is not supported: pagellm sends reasoning as text");
  }
  std::string text;
  for (const char* key : {"content", "summary"}) {
    const Json* parts = Field(item, key);
    if (parts == nullptr) continue;
    const std::string parts_at = absl::StrCat(at, ".", key);
    if (!parts->is_array()) return WrongType(parts_at, *parts, "a list");
    for (size_t k = 0; k < parts->size(); ++k) {
      const Json& part = (*parts)[k];
      const Json* t = part.is_object() ? Field(part, "text") : nullptr;
      if (t == nullptr || !t->is_string()) {
        return Error(absl::StrCat(parts_at, "[", k, "].text"),
                     absl::StrCat(parts_at, "[", k, "].text must be a string"));
      }
      if (!text.empty()) text += "\n";
      text += t->get_ref<const std::string&>();
    }
    if (!text.empty()) break;  // the full text when given, else the summary
  }
  return text;
}

// A function_call_output item (what a call returned) as a tool message.
absl::StatusOr<Json> ToolMessage(const Json& item, const std::string& at) {
  RETURN_IF_ERROR(CheckKnownFields(item, FieldSet({"type id call_id output status"}), at));
  ASSIGN_OR_RETURN(std::string call_id, ItemString(item, "call_id", at));
  ASSIGN_OR_RETURN(std::string output, ItemString(item, "output", at));
  return Json{
      {"role", "tool"}, {"tool_call_id", std::move(call_id)}, {"content", std::move(output)}};
}

// One message item of `input` as a chat message.
absl::StatusOr<Json> ChatMessage(const Json& item, const std::string& at) {
  RETURN_IF_ERROR(CheckKnownFields(item, FieldSet({"type role content id status"}), at));
  const Json* role = Field(item, "role");
  if (role == nullptr || !role->is_string()) {
    return Error(absl::StrCat(at, ".role"), absl::StrCat(at, ".role must be a string"));
  }
  std::string r = role->get<std::string>();
  if (r == "developer") r = "system";  // what the Responses API calls the system prompt
  if (r != "user" && r != "system" && r != "assistant") {
    return Error(absl::StrCat(at, ".role"),
                 absl::StrCat(at, ".role must be user, system, developer or assistant"));
  }
  const Json* content = Field(item, "content");
  const std::string content_at = absl::StrCat(at, ".content");
  if (content == nullptr) return Error(content_at, absl::StrCat(content_at, " is required"));
  Json message = {{"role", r}};
  if (content->is_string()) {
    message["content"] = *content;
  } else if (content->is_array()) {
    Json parts = Json::array();
    for (size_t k = 0; k < content->size(); ++k) {
      ASSIGN_OR_RETURN(Json part, ChatPart((*content)[k], absl::StrCat(content_at, "[", k, "]")));
      parts.push_back(std::move(part));
    }
    message["content"] = std::move(parts);
  } else {
    return WrongType(content_at, *content, "a string or a list of content parts");
  }
  return message;
}

// text.format as a chat response_format; null for plain text.
absl::StatusOr<Json> ResponseFormat(const Json& text, Json* format_out) {
  if (!text.is_object()) return WrongType("text", text, "an object");
  RETURN_IF_ERROR(CheckKnownFields(text, FieldSet({"format"}), "text"));
  const Json* format = Field(text, "format");
  if (format == nullptr) return Json();
  if (!format->is_object()) return WrongType("text.format", *format, "an object");
  const Json* type = Field(*format, "type");
  if (type == nullptr || !type->is_string()) {
    return Error("text.format.type", "text.format.type is required");
  }
  *format_out = *format;
  if (*type == "text") {
    RETURN_IF_ERROR(CheckKnownFields(*format, FieldSet({"type"}), "text.format"));
    return Json();
  }
  if (*type == "json_object") {
    RETURN_IF_ERROR(CheckKnownFields(*format, FieldSet({"type"}), "text.format"));
    return Json{{"type", "json_object"}};
  }
  if (*type == "json_schema") {
    RETURN_IF_ERROR(CheckKnownFields(*format, FieldSet({"type name schema strict description"}),
                                     "text.format"));
    Json schema = {{"name", format->value("name", Json("response"))}};
    if (const Json* s = Field(*format, "schema")) schema["schema"] = *s;
    if (const Json* s = Field(*format, "strict")) schema["strict"] = *s;
    if (const Json* s = Field(*format, "description")) schema["description"] = *s;
    return Json{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
  }
  return Error("text.format.type", "text.format.type must be text, json_object or json_schema");
}

absl::Status CheckMetadata(const Json& metadata) {
  if (!metadata.is_object()) return WrongType("metadata", metadata, "an object");
  if (metadata.size() > kMaxMetadataEntries) {
    return Error("metadata", absl::StrCat("metadata has ", metadata.size(),
                                          " entries; the limit is ", kMaxMetadataEntries));
  }
  for (const auto& [key, value] : metadata.items()) {
    if (key.size() > kMaxMetadataKeyBytes || !value.is_string() ||
        value.get_ref<const std::string&>().size() > kMaxMetadataValueBytes) {
      return Error("metadata",
                   absl::StrCat("metadata maps keys of at most ", kMaxMetadataKeyBytes,
                                " bytes to strings of at most ", kMaxMetadataValueBytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

// Function tools and tool_choice as chat spells them ({"type": "function", "function": {...}}).
absl::Status ToolsToChat(const Json& j, Json* chat) {
  if (const Json* tools = Field(j, "tools")) {
    if (!tools->is_array()) return WrongType("tools", *tools, "a list of tools");
    Json out = Json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& t = (*tools)[i];
      const std::string at = absl::StrCat("tools[", i, "]");
      if (!t.is_object()) return WrongType(at, t, "an object");
      const Json* type = Field(t, "type");
      if (type == nullptr || *type != "function") {
        return Error(absl::StrCat(at, ".type"),
                     absl::StrCat("tools of type ", type == nullptr ? "null" : type->dump(),
                                  " are not supported: pagellm serves function tools"));
      }
      RETURN_IF_ERROR(
          CheckKnownFields(t, FieldSet({"type name description parameters strict"}), at));
      Json function = Json::object();
      for (const char* key : {"name", "description", "parameters", "strict"}) {
        if (const Json* v = Field(t, key)) function[key] = *v;
      }
      out.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    if (!out.empty()) (*chat)["tools"] = std::move(out);
  }
  if (const Json* choice = Field(j, "tool_choice")) {
    if (choice->is_string()) {
      (*chat)["tool_choice"] = *choice;  // none, auto or required: chat checks
    } else if (choice->is_object() && choice->value("type", Json()) == "function") {
      RETURN_IF_ERROR(CheckKnownFields(*choice, FieldSet({"type name"}), "tool_choice"));
      (*chat)["tool_choice"] = {{"type", "function"},
                                {"function", {{"name", choice->value("name", Json())}}}};
    } else {
      return Error("tool_choice",
                   "tool_choice must be none, auto, required or {\"type\": \"function\", "
                   "\"name\": NAME}");
    }
  }
  return absl::OkStatus();
}

// What pagellm does not serve on this route, refused by name.
absl::Status RefuseUnserved(const Json& j) {
  if (Field(j, "previous_response_id") != nullptr) {
    return Error("previous_response_id",
                 "previous_response_id is not supported: pagellm stores no responses; send the "
                 "conversation as input");
  }
  if (const Json* b = Field(j, "background"); b != nullptr && *b != false) {
    return Error("background", "background responses are not supported");
  }
  if (Field(j, "reasoning") != nullptr) {
    return Error("reasoning", "reasoning options are not supported on /v1/responses");
  }
  if (const Json* t = Field(j, "truncation"); t != nullptr && *t != "disabled") {
    return Error("truncation", "truncation must be disabled (a prompt past the context is a 400)");
  }
  if (const Json* t = Field(j, "service_tier"); t != nullptr && *t != "auto" && *t != "default") {
    return Error("service_tier", "service_tier must be auto or default");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ResponsesRequest> ParseResponsesRequest(std::string_view body) {
  StrictJsonOptions options;
  options.max_depth = kMaxJsonDepth;
  absl::StatusOr<Json> parsed = ParseStrictJson(body, options);
  if (!parsed.ok()) {
    return Error("", absl::StrCat("the body is not valid JSON: ", parsed.status().message()));
  }
  const Json& j = *parsed;
  if (!j.is_object()) return Error("", "the body must be a JSON object");
  static const FieldSet* const kKnown = new FieldSet(
      kChatFields,
      "input instructions max_output_tokens text metadata store tools tool_choice "
      "parallel_tool_calls previous_response_id background reasoning truncation service_tier");
  RETURN_IF_ERROR(CheckKnownFields(j, *kKnown, ""));
  RETURN_IF_ERROR(RefuseUnserved(j));

  ResponsesRequest out;
  Json chat = Json::object();
  static const FieldSet* const kChat = new FieldSet({kChatFields});
  for (const auto& [key, value] : j.items()) {
    if (kChat->contains(key)) chat[key] = value;
  }
  Json messages = Json::array();
  ASSIGN_OR_RETURN(out.instructions, openai::GetString(j, "instructions", 1 << 20));
  if (out.instructions) messages.push_back({{"role", "system"}, {"content", *out.instructions}});
  const Json* input = Field(j, "input");
  if (input == nullptr) return Error("input", "input is required");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    if (input->empty() || input->size() > static_cast<size_t>(kMaxResponsesInputItems)) {
      return Error("input",
                   absl::StrCat("input must hold 1 to ", kMaxResponsesInputItems, " items"));
    }
    bool calls_last = false;               // the last message holds function_call items
    std::optional<std::string> reasoning;  // of the assistant message to come
    // The reasoning item before an assistant message goes with it.
    auto take_reasoning = [&reasoning](Json& m) {
      if (reasoning.has_value() && m["role"] == "assistant") m["reasoning"] = *reasoning;
      reasoning.reset();
    };
    for (size_t i = 0; i < input->size(); ++i) {
      const Json& item = (*input)[i];
      const std::string at = absl::StrCat("input[", i, "]");
      if (!item.is_object()) return WrongType(at, item, "an object");
      const Json* type = Field(item, "type");
      if (type != nullptr && *type == "function_call") {
        RETURN_IF_ERROR(AddFunctionCall(item, at, calls_last, &messages));
        if (!calls_last) take_reasoning(messages.back());
        calls_last = true;
        continue;
      }
      calls_last = false;
      if (type != nullptr && *type == "reasoning") {
        ASSIGN_OR_RETURN(reasoning, ReasoningText(item, at));
      } else if (type != nullptr && *type == "function_call_output") {
        ASSIGN_OR_RETURN(Json m, ToolMessage(item, at));
        messages.push_back(std::move(m));
      } else if (type == nullptr || *type == "message") {
        ASSIGN_OR_RETURN(Json m, ChatMessage(item, at));
        take_reasoning(m);
        messages.push_back(std::move(m));
      } else {
        return Error(absl::StrCat(at, ".type"),
                     absl::StrCat("input items of type ", type->dump().substr(0, 64),
                                  " are not supported: pagellm serves message, reasoning, "
                                  "function_call and function_call_output items"));
      }
    }
  } else {
    return WrongType("input", *input, "a string or a list of input items");
  }
  chat["messages"] = std::move(messages);
  RETURN_IF_ERROR(ToolsToChat(j, &chat));
  if (const Json* tools = Field(j, "tools")) out.tools = *tools;
  if (const Json* choice = Field(j, "tool_choice")) out.tool_choice = *choice;
  ASSIGN_OR_RETURN(out.max_output_tokens, openai::GetInt32(j, "max_output_tokens"));
  if (out.max_output_tokens) chat["max_completion_tokens"] = *out.max_output_tokens;
  ASSIGN_OR_RETURN(out.temperature, openai::GetFloat(j, "temperature"));
  ASSIGN_OR_RETURN(out.top_p, openai::GetFloat(j, "top_p"));
  if (const Json* text = Field(j, "text")) {
    ASSIGN_OR_RETURN(Json format, ResponseFormat(*text, &out.text_format));
    if (!format.is_null()) chat["response_format"] = std::move(format);
  }
  if (const Json* metadata = Field(j, "metadata")) {
    RETURN_IF_ERROR(CheckMetadata(*metadata));
    out.metadata = *metadata;
  }
  ASSIGN_OR_RETURN(auto store, openai::GetBool(j, "store"));
  (void)store;  // nothing is stored either way; previous_response_id is refused

  ASSIGN_OR_RETURN(out.chat, ParseChatRequest(chat.dump()));
  return out;
}

namespace {

Json TextPart(const std::string& text) {
  return {{"type", "output_text"},
          {"text", text},
          {"annotations", Json::array()},
          {"logprobs", Json::array()}};
}

}  // namespace

Json ResponsesResponse::Message(std::string_view status, const std::string& text) const {
  Json content = Json::array();
  if (status != "in_progress") content.push_back(TextPart(text));
  return {{"id", config_.item_id},
          {"type", "message"},
          {"status", std::string(status)},
          {"role", "assistant"},
          {"content", std::move(content)}};
}

Json ResponsesResponse::Items(std::string_view status) const {
  Json items = Json::array();
  std::string answer = text_;
  if (config_.reasoning) {
    ReasoningSplit split = SplitReasoning(text_);
    if (split.reasoning.has_value() && !split.reasoning->empty()) {
      items.push_back({{"id", absl::StrCat("rs_", IdSuffix())},
                       {"type", "reasoning"},
                       {"summary", Json::array()},
                       {"content", {{{"type", "reasoning_text"}, {"text", *split.reasoning}}}},
                       {"status", std::string(status)}});
    }
    answer = split.content.value_or("");
  }
  if (!tools()) {
    // A reply that is all reasoning (cut short) has no message.
    if (!answer.empty() || items.empty()) items.push_back(Message(status, answer));
    return items;
  }
  ToolReply reply = ReadToolReply(config_.echo.chat.tool_choice, config_.tool_format, answer);
  if (reply.content.has_value() && !reply.content->empty()) {
    items.push_back(Message(status, *reply.content));
  }
  for (size_t k = 0; k < reply.calls.size(); ++k) {
    items.push_back(
        {{"id", absl::StrCat("fc_", IdSuffix(), "_", k)},
         {"type", "function_call"},
         {"status", "completed"},
         {"call_id", config_.call_id ? config_.call_id() : NewToolCallId(config_.tool_format)},
         {"name", reply.calls[k].name},
         {"arguments", reply.calls[k].arguments}});
  }
  return items;
}

Json ResponsesResponse::Object(std::string_view status, Json output) const {
  const ResponsesRequest& r = config_.echo;
  Json o = {{"id", config_.id},
            {"object", "response"},
            {"created_at", config_.created_at},
            {"status", std::string(status)},
            {"background", false},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"instructions", r.instructions ? Json(*r.instructions) : Json()},
            {"max_output_tokens", r.max_output_tokens ? Json(*r.max_output_tokens) : Json()},
            {"metadata", r.metadata},
            {"model", config_.model},
            {"output", std::move(output)},
            {"parallel_tool_calls", r.chat.tool_choice.parallel_tool_calls},
            {"previous_response_id", nullptr},
            {"store", false},
            {"temperature", r.temperature ? Json(*r.temperature) : Json(1.0)},
            {"text", {{"format", r.text_format}}},
            {"tool_choice", r.tool_choice},
            {"tools", r.tools},
            {"top_p", r.top_p ? Json(*r.top_p) : Json(1.0)},
            {"truncation", "disabled"},
            {"usage", nullptr},
            {"user", nullptr}};
  if (status == "incomplete") o["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (status != "in_progress") {
    o["usage"] = {{"input_tokens", input_tokens_},
                  {"input_tokens_details", {{"cached_tokens", 0}}},
                  {"output_tokens", output_tokens_},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", input_tokens_ + output_tokens_}};
  }
  return o;
}

void ResponsesResponse::Event(std::string_view type, Json data, std::string* out) {
  Json e = {{"type", std::string(type)}, {"sequence_number", sequence_++}};
  for (auto& item : data.items()) e[item.key()] = std::move(item.value());
  absl::StrAppend(out, "event: ", absl::string_view(type.data(), type.size()),
                  "\ndata: ", e.dump(-1, ' ', false, Json::error_handler_t::replace), "\n\n");
}

void ResponsesResponse::AppendStart(std::string* out) {
  Event("response.created", {{"response", Object("in_progress", Json::array())}}, out);
  Event("response.in_progress", {{"response", Object("in_progress", Json::array())}}, out);
  if (buffered()) return;  // the items come whole at the end
  Event("response.output_item.added", {{"output_index", 0}, {"item", Message("in_progress", "")}},
        out);
  Event("response.content_part.added",
        {{"item_id", config_.item_id},
         {"output_index", 0},
         {"content_index", 0},
         {"part", TextPart("")}},
        out);
}

void ResponsesResponse::Append(int /*prompt*/, const v1::GenerateResponse& m, std::string* out) {
  for (const v1::SampleDelta& d : m.deltas()) {
    if (d.sample_index() != 0) continue;
    text_ += d.text();
    if (d.finish_reason() == v1::FINISH_REASON_LENGTH) length_ = true;
    if (out != nullptr && !d.text().empty() && !buffered()) {
      Event("response.output_text.delta",
            {{"item_id", config_.item_id},
             {"output_index", 0},
             {"content_index", 0},
             {"delta", d.text()},
             {"logprobs", Json::array()}},
            out);
    }
  }
  if (m.has_usage()) {
    input_tokens_ = m.usage().prompt_tokens();
    output_tokens_ = m.usage().completion_tokens();
  }
}

void ResponsesResponse::Reset(int /*prompt*/) {
  text_.clear();
  length_ = false;
  input_tokens_ = output_tokens_ = 0;
}

void ResponsesResponse::AppendError(const absl::Status& status, std::string* out) {
  failed_ = true;
  const std::string message(status.message());
  Event(
      "error",
      {{"code", absl::StatusCodeToString(status.code())}, {"message", message}, {"param", nullptr}},
      out);
  Json failed = Object("failed", Json::array());
  failed["error"] = {{"code", "server_error"}, {"message", message}};
  Event("response.failed", {{"response", std::move(failed)}}, out);
}

void ResponsesResponse::ItemEvents(int index, const Json& item, std::string* out) {
  const bool message = item["type"] == "message";
  const bool reasoning = item["type"] == "reasoning";
  Json added = item;
  added["status"] = "in_progress";
  if (message || reasoning) {
    added["content"] = Json::array();
  } else {
    added["arguments"] = "";
  }
  // Unbuffered, the message was announced at the start.
  if (buffered()) {
    Event("response.output_item.added", {{"output_index", index}, {"item", std::move(added)}}, out);
  }
  const Json where = {{"item_id", item["id"]}, {"output_index", index}};
  if (message) {
    const Json& part = item["content"][0];
    Json at = where;
    at["content_index"] = 0;
    Json e = at;
    e["part"] = TextPart("");
    if (buffered()) Event("response.content_part.added", std::move(e), out);
    if (buffered() && !part["text"].get_ref<const std::string&>().empty()) {
      e = at;
      e["delta"] = part["text"];
      e["logprobs"] = Json::array();
      Event("response.output_text.delta", std::move(e), out);
    }
    e = at;
    e["text"] = part["text"];
    e["logprobs"] = Json::array();
    Event("response.output_text.done", std::move(e), out);
    e = at;
    e["part"] = part;
    Event("response.content_part.done", std::move(e), out);
  } else if (reasoning) {
    const Json& text = item["content"][0]["text"];
    Json e = where;
    e["content_index"] = 0;
    e["delta"] = text;
    Event("response.reasoning_text.delta", e, out);
    e.erase("delta");
    e["text"] = text;
    Event("response.reasoning_text.done", std::move(e), out);
  } else {
    Json e = where;
    e["delta"] = item["arguments"];
    Event("response.function_call_arguments.delta", std::move(e), out);
    e = where;
    e["arguments"] = item["arguments"];
    Event("response.function_call_arguments.done", std::move(e), out);
  }
  Event("response.output_item.done", {{"output_index", index}, {"item", item}}, out);
}

void ResponsesResponse::AppendEnd(std::string* out) {
  if (failed_) return;
  const char* status = FinalStatus();
  Json items = Items(status);
  for (size_t i = 0; i < items.size(); ++i) ItemEvents(static_cast<int>(i), items[i], out);
  Event(length_ ? "response.incomplete" : "response.completed",
        {{"response", Object(status, std::move(items))}}, out);
}

std::string ResponsesResponse::Body() const {
  const char* status = FinalStatus();
  return Object(status, Items(status)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace pagellm
