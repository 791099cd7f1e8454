// ParseStrictJson: nlohmann-json parsing for hostile input: what HTTP clients send (OpenAI-style
// request bodies) and the files a model checkpoint brings along (safetensors headers,
// config.json, model.safetensors.index.json).
//
// Compared with nlohmann::json::parse it (1) reports errors as absl::Status instead of throwing,
// (2) rejects a key repeated within one object, which nlohmann would silently resolve to the last
// value, and (3) stops at the first container nested deeper than a cap, before allocating it,
// so a file of a million '[' costs no more than its own bytes.
//
// Thread-safe: a pure function.
#ifndef PAGELLM_COMMON_JSON_STRICT_JSON_H_
#define PAGELLM_COMMON_JSON_STRICT_JSON_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace pagellm {

struct StrictJsonOptions {
  int max_depth = 16;  // containers open at once; the formats above need at most 4
};

// Parses `text`; objects keep their keys in document order. InvalidArgument with a description
// (nlohmann's message with its byte position, "duplicate key 'k'", or "nested deeper than N")
// when the text is not one valid, UTF-8 JSON value within the limits.
absl::StatusOr<nlohmann::ordered_json> ParseStrictJson(
    std::string_view text, const StrictJsonOptions& options = StrictJsonOptions());

}  // namespace pagellm

#endif  // PAGELLM_COMMON_JSON_STRICT_JSON_H_
