#include "common/chat_template/template_kwargs.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/json/json_scan.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"

namespace pagellm::chat_template {
namespace {

using Json = nlohmann::ordered_json;

// The variables the caller sets itself, which the kwargs may not replace.
constexpr std::string_view kReserved[] = {"messages", "tools", "documents",
                                          "add_generation_prompt"};

absl::StatusOr<Value> Convert(const Json& j, int depth, absl::string_view what,
                              RenderContext& ctx) {
  if (depth > kMaxKwargsDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " nests deeper than ", kMaxKwargsDepth, " levels"));
  }
  RETURN_IF_ERROR(ctx.ChargeSteps(1));
  switch (j.type()) {
    case Json::value_t::null:
      return Value::None();
    case Json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case Json::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": integer does not fit in 64 bits"));
      }
      return Value::Int(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::Float(j.get<double>());
    case Json::value_t::string:
      return ctx.MakeString(SanitizeUtf8(j.get_ref<const std::string&>()));
    case Json::value_t::array: {
      std::vector<Value> items;
      for (const Json& item : j) {
        ASSIGN_OR_RETURN(Value v, Convert(item, depth + 1, what, ctx));
        items.push_back(std::move(v));
      }
      return ctx.MakeList(std::move(items));
    }
    case Json::value_t::object: {
      Value dict = ctx.MakeDict();
      for (const auto& [key, item] : j.items()) {
        ASSIGN_OR_RETURN(Value k, ctx.MakeString(SanitizeUtf8(key)));
        ASSIGN_OR_RETURN(Value v, Convert(item, depth + 1, what, ctx));
        dict.AsDict()->Set(std::move(k), std::move(v));
      }
      return dict;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(what, ": unsupported JSON value"));
  }
}

}  // namespace

absl::StatusOr<Value> ParseJsonValue(std::string_view json, absl::string_view what,
                                     RenderContext& ctx) {
  RETURN_IF_ERROR(ctx.ChargeBytes(json.size()));
  RETURN_IF_ERROR(ctx.CheckStringSize(json.size()));
  // The parser recurses per level of nesting: reject deep input before parsing it.
  // (A parse stops at the first error, so only the first value can make it recurse.)
  if (const size_t at = json.find_first_not_of(" \t\r\n");
      at != std::string_view::npos && (json[at] == '{' || json[at] == '[') &&
      ScanJsonContainer(json, at, kMaxKwargsDepth + 1).too_deep) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " nests deeper than ", kMaxKwargsDepth, " levels"));
  }
  Json parsed = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON"));
  }
  return Convert(parsed, 1, what, ctx);
}

absl::Status AddTemplateKwargs(std::string_view json, RenderContext& ctx,
                               std::vector<std::pair<std::string, Value>>* globals) {
  ASSIGN_OR_RETURN(Value kwargs, ParseJsonValue(json, "chat_template_kwargs", ctx));
  if (kwargs.kind() != ValueKind::kDict) {
    return absl::InvalidArgumentError("chat_template_kwargs must be a JSON object");
  }
  for (const auto& [key, v] : kwargs.AsDict()->entries) {
    const std::string& name = key.AsString();
    for (std::string_view reserved : kReserved) {
      if (name == reserved) {
        return absl::InvalidArgumentError(
            absl::StrCat("chat_template_kwargs may not set '", name, "'"));
      }
    }
    bool replaced = false;
    for (auto& [existing, value] : *globals) {
      if (existing == name) {
        value = v;
        replaced = true;
      }
    }
    if (!replaced) globals->emplace_back(name, v);
  }
  return absl::OkStatus();
}

}  // namespace pagellm::chat_template
