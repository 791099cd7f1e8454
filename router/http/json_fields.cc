#include "router/http/json_fields.h"

#include <cmath>
#include <limits>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pagellm::openai {

absl::Status Error(absl::string_view param, absl::string_view message) {
  absl::Status s = absl::InvalidArgumentError(message);
  if (!param.empty()) s.SetPayload(kParamPayload, absl::Cord(param));
  return s;
}

const char* TypeName(const Json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

absl::Status WrongType(absl::string_view param, const Json& v, absl::string_view want) {
  return Error(param, absl::StrCat(param, " must be ", want, ", got ", TypeName(v)));
}

// The value of `name` in `obj`, or null when absent or JSON null.
const Json* Field(const Json& obj, absl::string_view name) {
  auto it = obj.find(std::string(name));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::optional<bool>> GetBool(const Json& obj, absl::string_view name) {
  const Json* v = Field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return WrongType(name, *v, "a boolean");
  return v->get<bool>();
}

absl::StatusOr<std::optional<int64_t>> GetInt(const Json& obj, absl::string_view name,
                                              absl::string_view param) {
  if (param.empty()) param = name;
  const Json* v = Field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error(param, absl::StrCat(param, " is out of range"));
    }
    return v->get<int64_t>();
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      return static_cast<int64_t>(d);
    }
  }
  return WrongType(param, *v, "an integer");
}

// An integer that must fit int32 (every count and length of the API).
absl::StatusOr<std::optional<int32_t>> GetInt32(const Json& obj, absl::string_view name) {
  absl::StatusOr<std::optional<int64_t>> v = GetInt(obj, name);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return std::nullopt;
  if (**v < std::numeric_limits<int32_t>::min() || **v > std::numeric_limits<int32_t>::max()) {
    return Error(name, absl::StrCat(name, " is out of range, got ", **v));
  }
  return static_cast<int32_t>(**v);
}

absl::StatusOr<std::optional<float>> GetFloat(const Json& obj, absl::string_view name) {
  const Json* v = Field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return WrongType(name, *v, "a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || std::fabs(d) > 1e30) {
    return Error(name, absl::StrCat(name, " is out of range"));
  }
  return static_cast<float>(d);
}

absl::StatusOr<std::optional<std::string>> GetString(const Json& obj, absl::string_view name,
                                                     size_t max_bytes) {
  const Json* v = Field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return WrongType(name, *v, "a string");
  std::string s = v->get<std::string>();
  if (s.size() > max_bytes) {
    return Error(name,
                 absl::StrCat(name, " is ", s.size(), " bytes long; the limit is ", max_bytes));
  }
  return s;
}

FieldSet::FieldSet(std::initializer_list<const char*> lists) {
  for (const char* list : lists) {
    for (absl::string_view name : absl::StrSplit(list, ' ', absl::SkipEmpty())) {
      names_.emplace(name);
    }
  }
}

// Refuses a field that is not in `known` (the endpoint's fields).
absl::Status CheckKnownFields(const Json& obj, const FieldSet& known, absl::string_view where) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!known.contains(it.key())) {
      const std::string param = where.empty() ? it.key() : absl::StrCat(where, ".", it.key());
      return Error(param, absl::StrCat("unknown or unsupported field '", param, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pagellm::openai
