// Reading the fields of an OpenAI-style JSON request body: typed getters that treat JSON null as
// absent, and errors that carry the field's JSON path as the status payload kParamPayload
// (the OpenAI error object's `param`). Integer fields take JSON numbers with an integral value
// (2.0 too, as pydantic does for vLLM); number fields take any finite number.
//
// Thread-safe: pure functions; FieldSet is immutable after construction.
#ifndef PAGELLM_ROUTER_HTTP_JSON_FIELDS_H_
#define PAGELLM_ROUTER_HTTP_JSON_FIELDS_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace pagellm::openai {

using Json = nlohmann::ordered_json;

// The status payload type URL under which errors carry the offending field's path.
inline constexpr absl::string_view kParamPayload = "pagellm/openai-param";

// InvalidArgument with `message`, naming `param` (when not empty) in the payload.
absl::Status Error(absl::string_view param, absl::string_view message);
// "a string", "an object", ... for messages.
const char* TypeName(const Json& v);
// "<param> must be <want>, got <type>".
absl::Status WrongType(absl::string_view param, const Json& v, absl::string_view want);

// The value of `name` in `obj`, or null when absent or JSON null.
const Json* Field(const Json& obj, absl::string_view name);

absl::StatusOr<std::optional<bool>> GetBool(const Json& obj, absl::string_view name);
// `param` (default: `name`) names the field in errors.
absl::StatusOr<std::optional<int64_t>> GetInt(const Json& obj, absl::string_view name,
                                              absl::string_view param = {});
// An integer that must fit int32 (every count and length of the API).
absl::StatusOr<std::optional<int32_t>> GetInt32(const Json& obj, absl::string_view name);
absl::StatusOr<std::optional<float>> GetFloat(const Json& obj, absl::string_view name);
// A string of at most `max_bytes`.
absl::StatusOr<std::optional<std::string>> GetString(const Json& obj, absl::string_view name,
                                                     size_t max_bytes);

// A set of field names, given as space-separated lists.
class FieldSet {
 public:
  FieldSet(std::initializer_list<const char*> lists);
  FieldSet(const char* a, const char* b) : FieldSet({a, b}) {}
  [[nodiscard]] bool contains(absl::string_view name) const { return names_.contains(name); }

 private:
  absl::flat_hash_set<std::string> names_;
};

// Refuses a field of `obj` that is not in `known`; `where` is `obj`'s path ("" at the top).
absl::Status CheckKnownFields(const Json& obj, const FieldSet& known, absl::string_view where);

}  // namespace pagellm::openai

#endif  // PAGELLM_ROUTER_HTTP_JSON_FIELDS_H_
