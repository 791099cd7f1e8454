// Extra template variables from JSON: vLLM's `chat_template_kwargs` (e.g.
// {"enable_thinking": false}), which transformers' apply_chat_template passes to the template as
// keyword arguments. JSON values become the Python values json.loads makes: true/false bools,
// integers ints, other numbers floats, strings, null none, arrays lists, objects dicts (keys in
// order).
//
// Thread-safe: a pure function (values are made in the caller's RenderContext).
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_TEMPLATE_KWARGS_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_TEMPLATE_KWARGS_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/chat_template/render_context.h"
#include "common/chat_template/value.h"

namespace pagellm::chat_template {

// Deepest nesting of arrays and objects accepted in template kwargs.
inline constexpr int kMaxKwargsDepth = 32;

// Parses the JSON text `json` into the value json.loads makes; `what` names it in errors.
// InvalidArgument for invalid JSON, nesting deeper than kMaxKwargsDepth, an integer past 64 bits
// or values past `ctx`'s limits. Invalid UTF-8 in strings becomes U+FFFD.
absl::StatusOr<Value> ParseJsonValue(std::string_view json, absl::string_view what,
                                     RenderContext& ctx);

// Parses `json` (a JSON object) and sets each member as a variable in `globals`, replacing a
// variable of the same name (bos_token, ...) or appending. InvalidArgument for invalid JSON, a
// non-object, nesting deeper than kMaxKwargsDepth, an integer past 64 bits, a member named
// messages, tools, documents or add_generation_prompt, or values past `ctx`'s limits (every
// item counts a step, every string its bytes). Invalid UTF-8 in strings becomes U+FFFD.
absl::Status AddTemplateKwargs(std::string_view json, RenderContext& ctx,
                               std::vector<std::pair<std::string, Value>>* globals);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_TEMPLATE_KWARGS_H_
