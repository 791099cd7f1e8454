#include "worker/model/hf_eos.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/json/strict_json.h"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Bad(std::string_view source, std::string_view what) {
  std::string m(source);
  m.append(": ").append(what);
  return absl::InvalidArgumentError(m);
}

absl::StatusOr<Json> ParseObject(std::string_view json, std::string_view source) {
  absl::StatusOr<Json> parsed = ParseStrictJson(json);
  if (!parsed.ok()) return Bad(source, absl::StrCat("not JSON: ", parsed.status().message()));
  if (!parsed->is_object()) return Bad(source, "not a JSON object");
  return parsed;
}

// `value`: an id or a list of ids.
absl::StatusOr<std::vector<int32_t>> Ids(const Json& value, std::string_view source) {
  std::vector<int32_t> out;
  if (value.is_null()) return out;
  const bool list = value.is_array();
  if (list && value.size() > kMaxEosTokenIds) {
    return Bad(source, absl::StrCat("eos_token_id lists more than ", kMaxEosTokenIds, " ids"));
  }
  for (const Json& v : list ? value : Json::array({value})) {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0) ||
        (v.is_number_unsigned() && v.get<uint64_t>() > std::numeric_limits<int32_t>::max())) {
      return Bad(source, "eos_token_id must be a token id (an integer >= 0) or a list of them");
    }
    out.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> EosIdsFromGenerationConfig(std::string_view json,
                                                                std::string_view source) {
  absl::StatusOr<Json> root = ParseObject(json, source);
  if (!root.ok()) return root.status();
  auto it = root->find("eos_token_id");
  if (it == root->end()) return std::vector<int32_t>();
  return Ids(*it, source);
}

absl::StatusOr<std::vector<int32_t>> EosIdsFromConfigJson(std::string_view json,
                                                          std::string_view source) {
  absl::StatusOr<Json> root = ParseObject(json, source);
  if (!root.ok()) return root.status();
  if (auto it = root->find("eos_token_id"); it != root->end()) return Ids(*it, source);
  // transformers' LlamaConfig and MistralConfig default to 2; Qwen2Config to none.
  auto type = root->find("model_type");
  if (type != root->end() && type->is_string() && (*type == "llama" || *type == "mistral")) {
    return std::vector<int32_t>{2};
  }
  return std::vector<int32_t>();
}

}  // namespace pagellm
