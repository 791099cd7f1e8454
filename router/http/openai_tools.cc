#include "router/http/openai_tools.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/api/request_limits.h"
#include "common/sampling/sampling_params.h"
#include "common/status_macros.h"

namespace pagellm {
namespace {

using openai::CheckKnownFields;
using openai::Error;
using openai::Field;
using openai::Json;
using openai::WrongType;

constexpr absl::string_view kNamedUsage =
    " Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`";

absl::StatusOr<std::string> RequiredString(const Json& obj, absl::string_view key,
                                           absl::string_view at, size_t max_bytes) {
  const std::string param = absl::StrCat(at, ".", key);
  const Json* v = Field(obj, key);
  if (v == nullptr) return Error(param, absl::StrCat(param, " is required"));
  if (!v->is_string()) return WrongType(param, *v, "a string");
  if (v->get_ref<const std::string&>().size() > max_bytes) {
    return Error(param, absl::StrCat(param, " is longer than ", max_bytes, " bytes"));
  }
  return v->get<std::string>();
}

absl::Status ParseTool(const Json& tool, absl::string_view at, v1::Tool* out) {
  if (!tool.is_object()) return WrongType(at, tool, "an object");
  RETURN_IF_ERROR(CheckKnownFields(tool, {"type function"}, at));
  if (const Json* type = Field(tool, "type"); type != nullptr && *type != "function") {
    return Error(absl::StrCat(at, ".type"),
                 absl::StrCat(at, ".type must be \"function\" (the only kind of tool)"));
  }
  const std::string fat = absl::StrCat(at, ".function");
  const Json* function = Field(tool, "function");
  if (function == nullptr) return Error(fat, absl::StrCat(fat, " is required"));
  if (!function->is_object()) return WrongType(fat, *function, "an object");
  RETURN_IF_ERROR(CheckKnownFields(*function, {"name description parameters strict"}, fat));
  ASSIGN_OR_RETURN(*out->mutable_name(), RequiredString(*function, "name", fat, kMaxToolNameBytes));
  if (const Json* d = Field(*function, "description")) {
    if (!d->is_string()) return WrongType(absl::StrCat(fat, ".description"), *d, "a string");
    out->set_description(d->get<std::string>());
  }
  if (const Json* p = Field(*function, "parameters")) {
    if (!p->is_object()) return WrongType(absl::StrCat(fat, ".parameters"), *p, "an object");
    out->set_parameters(p->dump());
  }
  if (const Json* strict = Field(*function, "strict")) {
    if (!strict->is_boolean()) return WrongType(absl::StrCat(fat, ".strict"), *strict, "a boolean");
    out->set_strict(strict->get<bool>());
  }
  return absl::OkStatus();
}

// tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}.
absl::StatusOr<ToolChoice> ParseChoice(const Json& j, const v1::ChatPrompt& chat) {
  ToolChoice choice;
  const Json* v = Field(j, "tool_choice");
  if (v == nullptr) {
    // OpenAI's and vLLM's default: "auto" when tools are given.
    choice.mode = chat.tools_size() > 0 ? ToolChoice::Mode::kAuto : ToolChoice::Mode::kNone;
    return choice;
  }
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (s == "none") return choice;
    if (s == "auto") {
      choice.mode = ToolChoice::Mode::kAuto;
    } else if (s == "required") {
      choice.mode = ToolChoice::Mode::kRequired;
    } else {
      return Error("tool_choice",
                   absl::StrCat("Invalid value for `tool_choice`: ", s,
                                "! Only named tools, \"none\", \"auto\" or \"required\" are "
                                "supported."));
    }
  } else if (v->is_object()) {
    RETURN_IF_ERROR(CheckKnownFields(*v, {"type function"}, "tool_choice"));
    if (const Json* type = Field(*v, "type"); type != nullptr && *type != "function") {
      return Error("tool_choice.type", "tool_choice.type must be \"function\"");
    }
    const Json* function = Field(*v, "function");
    if (function == nullptr || !function->is_object()) {
      return Error("tool_choice.function",
                   absl::StrCat("Invalid value for `function` in `tool_choice`!", kNamedUsage));
    }
    RETURN_IF_ERROR(CheckKnownFields(*function, {"name"}, "tool_choice.function"));
    const Json* name = Field(*function, "name");
    if (name == nullptr) {
      return Error(
          "tool_choice.function.name",
          absl::StrCat("Expected field `name` in `function` in `tool_choice`!", kNamedUsage));
    }
    if (!name->is_string() || name->get_ref<const std::string&>().empty()) {
      return Error("tool_choice.function.name",
                   absl::StrCat("Invalid `name` in `function` in `tool_choice`!", kNamedUsage));
    }
    choice.mode = ToolChoice::Mode::kNamed;
    choice.name = name->get<std::string>();
  } else {
    return WrongType("tool_choice", *v, "a string or an object");
  }
  if (Field(j, "tools") == nullptr) {
    return Error("tool_choice", "When using `tool_choice`, `tools` must be set.");
  }
  if (chat.tools_size() == 0 && choice.mode == ToolChoice::Mode::kRequired) {
    choice.mode = ToolChoice::Mode::kNone;  // vLLM: "required" of no tools calls none
  }
  if (choice.mode == ToolChoice::Mode::kNamed) {
    bool found = false;
    for (const v1::Tool& t : chat.tools()) found = found || t.name() == choice.name;
    if (!found) {
      return Error("tool_choice",
                   "The tool specified in `tool_choice` does not match any of the specified "
                   "`tools`");
    }
  }
  return choice;
}

absl::StatusOr<Json> ParametersOf(const v1::Tool& tool) {
  if (tool.parameters().empty()) {
    return Json{{"type", "object"}, {"properties", Json::object()}};
  }
  Json p = Json::parse(tool.parameters(), nullptr, /*allow_exceptions=*/false);
  if (p.is_discarded()) return absl::InternalError("tool parameters do not parse");
  return p;
}

}  // namespace

absl::Status ParseMessageToolFields(const Json& m, absl::string_view at, v1::ChatMessage* out) {
  if (const Json* calls = Field(m, "tool_calls")) {
    const std::string cat = absl::StrCat(at, ".tool_calls");
    if (!calls->is_array()) return WrongType(cat, *calls, "an array");
    if (calls->size() > static_cast<size_t>(kMaxToolCallsPerMessage)) {
      return Error(cat, absl::StrCat(cat, " has ", calls->size(), " entries; the limit is ",
                                     kMaxToolCallsPerMessage));
    }
    for (size_t i = 0; i < calls->size(); ++i) {
      const Json& call = (*calls)[i];
      const std::string p = absl::StrCat(cat, "[", i, "]");
      if (!call.is_object()) return WrongType(p, call, "an object");
      RETURN_IF_ERROR(CheckKnownFields(call, {"id type function"}, p));
      if (const Json* type = Field(call, "type"); type != nullptr && *type != "function") {
        return Error(absl::StrCat(p, ".type"), absl::StrCat(p, ".type must be \"function\""));
      }
      v1::ToolCall* c = out->add_tool_calls();
      ASSIGN_OR_RETURN(*c->mutable_id(), RequiredString(call, "id", p, kMaxToolNameBytes));
      const std::string fp = absl::StrCat(p, ".function");
      const Json* function = Field(call, "function");
      if (function == nullptr) return Error(fp, absl::StrCat(fp, " is required"));
      if (!function->is_object()) return WrongType(fp, *function, "an object");
      RETURN_IF_ERROR(CheckKnownFields(*function, {"name arguments"}, fp));
      ASSIGN_OR_RETURN(*c->mutable_name(),
                       RequiredString(*function, "name", fp, kMaxToolNameBytes));
      if (const Json* args = Field(*function, "arguments")) {
        // OpenAI sends JSON text; an object is taken as the value it is.
        if (args->is_string()) {
          c->set_arguments(args->get<std::string>());
        } else if (args->is_object()) {
          c->set_arguments(args->dump());
        } else {
          return WrongType(absl::StrCat(fp, ".arguments"), *args, "a string (JSON text)");
        }
      }
    }
  }
  if (const Json* id = Field(m, "tool_call_id")) {
    if (!id->is_string()) return WrongType(absl::StrCat(at, ".tool_call_id"), *id, "a string");
    out->set_tool_call_id(id->get<std::string>());
  }
  // An earlier reply's reasoning, under vLLM's name or DeepSeek's (the first given).
  for (const char* key : {"reasoning", "reasoning_content"}) {
    if (const Json* r = Field(m, key)) {
      if (!r->is_string()) return WrongType(absl::StrCat(at, ".", key), *r, "a string");
      if (!out->has_reasoning()) out->set_reasoning(r->get<std::string>());
    }
  }
  if (const Json* name = Field(m, "name")) {
    if (!name->is_string()) return WrongType(absl::StrCat(at, ".name"), *name, "a string");
    out->set_name(name->get<std::string>());
  }
  return absl::OkStatus();
}

absl::StatusOr<ToolChoice> ParseTools(const Json& j, v1::ChatPrompt* chat, v1::SamplingParams* s) {
  for (const char* legacy : {"functions", "function_call"}) {
    if (Field(j, legacy) != nullptr) {
      return Error(legacy, absl::StrCat(legacy,
                                        " (deprecated function calling) is not supported; use "
                                        "tools and tool_choice"));
    }
  }
  if (const Json* tools = Field(j, "tools")) {
    if (!tools->is_array()) return WrongType("tools", *tools, "an array");
    if (tools->size() > static_cast<size_t>(kMaxTools)) {
      return Error("tools",
                   absl::StrCat("tools has ", tools->size(), " entries; the limit is ", kMaxTools));
    }
    for (size_t i = 0; i < tools->size(); ++i) {
      RETURN_IF_ERROR(ParseTool((*tools)[i], absl::StrCat("tools[", i, "]"), chat->add_tools()));
    }
  }
  ASSIGN_OR_RETURN(ToolChoice choice, ParseChoice(j, *chat));
  if (const Json* parallel = Field(j, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) return WrongType("parallel_tool_calls", *parallel, "a boolean");
    choice.parallel_tool_calls = parallel->get<bool>();
  }
  std::string schema;
  if (choice.mode == ToolChoice::Mode::kNamed) {
    for (const v1::Tool& t : chat->tools()) {
      if (t.name() != choice.name) continue;
      ASSIGN_OR_RETURN(Json p, ParametersOf(t));
      schema = p.dump();
      break;
    }
  } else if (choice.mode == ToolChoice::Mode::kRequired) {
    ASSIGN_OR_RETURN(schema, RequiredToolsSchema(*chat, choice.parallel_tool_calls ? 0 : 1));
  }
  if (!schema.empty()) {
    if (s->has_structured_output()) {
      return Error("tool_choice",
                   "a named or \"required\" tool_choice is a structured output of its own: it "
                   "cannot go with response_format, structured_outputs or guided_*");
    }
    if (schema.size() > static_cast<size_t>(kMaxStructuredBytes)) {
      return Error("tools", absl::StrCat("the schema of the tool call is ", schema.size(),
                                         " bytes; the limit is ", kMaxStructuredBytes));
    }
    s->mutable_structured_output()->set_json_schema(std::move(schema));
  }
  return choice;
}

absl::StatusOr<std::string> RequiredToolsSchema(const v1::ChatPrompt& chat, int max_calls) {
  // A tool's "$defs" (and older "definitions") move to the top, where "#/$defs/X" resolves now.
  Json defs = {{"$defs", Json::object()}, {"definitions", Json::object()}};
  Json variants = Json::array();
  for (int i = 0; i < chat.tools_size(); ++i) {
    const v1::Tool& t = chat.tools(i);
    ASSIGN_OR_RETURN(Json p, ParametersOf(t));
    for (const char* key : {"$defs", "definitions"}) {
      auto it = p.find(key);
      if (it == p.end()) continue;
      if (!it->is_object()) {
        return Error(absl::StrCat("tools[", i, "].function.parameters.", key),
                     absl::StrCat(key, " must be an object"));
      }
      Json& top = defs[key];
      for (const auto& [name, def] : it->items()) {
        if (auto existing = top.find(name); existing != top.end() && *existing != def) {
          return Error(absl::StrCat("tools[", i, "].function.parameters"),
                       absl::StrCat("Tool definition '", name,
                                    "' has multiple schemas, which is not supported."));
        }
        top[name] = def;
      }
      p.erase(it);
    }
    variants.push_back({{"type", "object"},
                        {"properties",
                         {{"name", {{"type", "string"}, {"enum", Json::array({t.name()})}}},
                          {"parameters", std::move(p)}}},
                        {"required", Json::array({"name", "parameters"})}});
  }
  Json items = variants.size() == 1 ? variants[0] : Json{{"anyOf", std::move(variants)}};
  Json schema = {{"type", "array"}, {"minItems", 1}};
  if (max_calls > 0) schema["maxItems"] = max_calls;
  schema["items"] = std::move(items);
  for (auto& [key, top] : defs.items()) {
    if (!top.empty()) schema[key] = std::move(top);
  }
  return schema.dump();
}

}  // namespace pagellm
