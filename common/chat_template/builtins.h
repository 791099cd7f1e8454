// The builtin functions a chat template can call: filters (`x | trim`), tests (`x is defined`),
// methods (`s.strip()`, `d.items()`, `'{}'.format(x)`, `loop.cycle(..)`, `cycler.next()`) and
// global functions (`range`, `namespace`, `dict`, `joiner`, `cycler`, `raise_exception`,
// `strftime_now`). Each is looked up by name at render time, so a
// template that names an unknown filter in a branch it never takes still renders (Jinja2 would
// reject it when compiling).
//
// Builtins fail with InvalidArgument and Python's or Jinja2's message. raise_exception's error
// carries the template's message verbatim and is marked with kRaisedByTemplatePayload.
//
// Thread-safe: the tables are immutable; each call works on its render's context.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_BUILTINS_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_BUILTINS_H_

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/chat_template/render_context.h"
#include "common/chat_template/value.h"

namespace pagellm::chat_template {

// Status payload type URL marking the error of the template's raise_exception(msg).
inline constexpr char kRaisedByTemplatePayload[] = "pagellm.chat_template/raised";

// The arguments of a call: f(a, b, key=c).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

// Binds `args` to parameters `params` as Python would (positionally, then by keyword); the
// first `required` parameters must be given. Unset optional parameters come back empty.
// InvalidArgument for too many arguments, an unknown or repeated keyword, a missing one.
absl::StatusOr<std::vector<std::optional<Value>>> BindArgs(
    std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> params,
    size_t required);

using FilterFn = absl::StatusOr<Value> (*)(RenderContext& ctx, const Value& value,
                                           const CallArgs& args);
using TestFn = absl::StatusOr<bool> (*)(RenderContext& ctx, const Value& value,
                                        const CallArgs& args);
using MethodFn = absl::StatusOr<Value> (*)(RenderContext& ctx, const Value& self,
                                           const CallArgs& args);
using GlobalFn = absl::StatusOr<Value> (*)(RenderContext& ctx, const CallArgs& args);

// Each returns nullptr when there is no builtin of that name (for `self`'s type).
FilterFn FindFilter(std::string_view name);
TestFn FindTest(std::string_view name);
MethodFn FindMethod(const Value& self, std::string_view name);
GlobalFn FindGlobal(std::string_view name);

// Calls test `name` (for select/reject): InvalidArgument if there is none.
absl::StatusOr<bool> CallTest(RenderContext& ctx, std::string_view name, const Value& value,
                              const CallArgs& args);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_BUILTINS_H_
