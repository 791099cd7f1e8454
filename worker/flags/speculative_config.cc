#include "worker/flags/speculative_config.h"

#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/json/strict_json.h"
#include "common/status_macros.h"

namespace pagellm::cli {
namespace {

absl::StatusOr<int32_t> Int(const nlohmann::ordered_json& v, const std::string& key) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
      v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--speculative-config: ", key, " must be a non-negative integer"));
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

}  // namespace

absl::StatusOr<NgramOptions> ParseSpeculativeConfig(std::string_view json) {
  NgramOptions o;
  if (json.empty()) return o;
  ASSIGN_OR_RETURN(nlohmann::ordered_json doc, ParseStrictJson(json));
  if (!doc.is_object()) {
    return absl::InvalidArgumentError("--speculative-config must be a JSON object");
  }
  std::optional<int32_t> max_n, min_n;
  bool have_tokens = false;
  for (const auto& [key, v] : doc.items()) {
    if (key == "method") {
      if (!v.is_string() || (v != "ngram" && v != "[ngram]")) {
        return absl::InvalidArgumentError(
            "--speculative-config: the method pagellm serves is \"ngram\" (prompt lookup); "
            "draft models, EAGLE, Medusa and MTP are not served");
      }
    } else if (key == "num_speculative_tokens") {
      ASSIGN_OR_RETURN(o.num_speculative_tokens, Int(v, key));
      have_tokens = true;
    } else if (key == "prompt_lookup_max") {
      ASSIGN_OR_RETURN(max_n, Int(v, key));
    } else if (key == "prompt_lookup_min") {
      ASSIGN_OR_RETURN(min_n, Int(v, key));
    } else if (key == "disable_by_batch_size") {
      ASSIGN_OR_RETURN(o.disable_by_batch_size, Int(v, key));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--speculative-config: unknown key '", key.substr(0, 40),
                       "' (method, num_speculative_tokens, prompt_lookup_max, prompt_lookup_min, "
                       "disable_by_batch_size)"));
    }
  }
  if (!doc.contains("method")) {
    return absl::InvalidArgumentError("--speculative-config needs \"method\": \"ngram\"");
  }
  if (!have_tokens) {
    return absl::InvalidArgumentError("--speculative-config needs num_speculative_tokens");
  }
  if (!max_n.has_value() && !min_n.has_value()) max_n = min_n = 5;
  o.prompt_lookup_max = max_n.value_or(*min_n);
  o.prompt_lookup_min = min_n.value_or(*max_n);
  if (absl::Status st = o.Validate(); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--speculative-config: ", st.message()));
  }
  return o;
}

}  // namespace pagellm::cli
