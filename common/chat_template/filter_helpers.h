// Helpers shared by the files of builtin filters (builtin_filters.cc, filters_grouping.cc,
// filters_text.cc), and the lookups of the latter two, which builtin_filters.cc's FindFilter
// consults. Internal to the interpreter.
//
// Thread-safe: pure functions (values are made in the caller's RenderContext).
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_FILTER_HELPERS_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_FILTER_HELPERS_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/chat_template/builtins.h"
#include "common/chat_template/render_context.h"
#include "common/chat_template/value.h"

namespace pagellm::chat_template {

// Jinja2's soft_str: str(v), "" for undefined.
absl::StatusOr<std::string> ToStr(RenderContext& ctx, const Value& v);

// InvalidArgument if `args` is not empty.
absl::Status NoArgs(std::string_view name, const CallArgs& args);

// Jinja2's make_attrgetter: follows "a.b.0" with getitem; `fallback` replaces an undefined
// result.
absl::StatusOr<Value> GetPath(RenderContext& ctx, const Value& item, const Value& attribute,
                              const std::optional<Value>& fallback);

// Python float(str) for the forms templates meet; nullopt when Python would raise ValueError.
std::optional<double> ParseFloat(const std::string& text);

// markupsafe.escape(s) of a string: & < > " ' as entities.
std::string HtmlEscape(std::string_view s);

// Jinja2's ignore_case postprocessing: strings lowered, anything else as it is.
Value IgnoreCase(const Value& v);

// The filters of filters_grouping.cc (dictsort, batch, slice, groupby) and filters_text.cc
// (wordcount, format, striptags, urlencode, filesizeformat, xmlattr, forceescape, pprint);
// nullptr for other names.
FilterFn FindGroupingFilter(std::string_view name);
FilterFn FindTextFilter(std::string_view name);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_FILTER_HELPERS_H_
