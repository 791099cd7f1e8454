// Python's string formatting, as chat templates reach it: printf-style `fmt % args` (and
// Jinja2's `format` filter, which is `fmt % args`), str.format(*args, **kwargs) and the format
// specs of format() for int, bool, float and str: [[fill]align][sign][#][0][width][,|_]
// [.precision][type] with types s, d, b, o, x, X, c, e, E, f, F, g, G and %.
//
// What is not implemented fails with InvalidArgument rather than render differently: the n
// type and the z flag, `#` with floats, a precision without a type for floats, '0' padding
// or '=' alignment together with grouping, field names with attributes or indexes
// ({0.x}, {a[1]}), nested replacement fields ({:{width}}), the !a conversion and %a.
// Python's errors (a missing argument, a wrong type for a conversion) are InvalidArgument with
// Python's message.
//
// Results longer than `max_bytes` fail (InvalidArgument) before they are built. Pure and
// thread-safe.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_PY_FORMAT_STRING_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_PY_FORMAT_STRING_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chat_template/value.h"

namespace pagellm::chat_template {

// fmt % args. `args`: a tuple gives the positional arguments; a dict or list may also be read
// by %(key)s; anything else is the single argument.
absl::StatusOr<std::string> PyPercentFormat(std::string_view fmt, const Value& args,
                                            size_t max_bytes);

// fmt.format(*positional, **keywords).
absl::StatusOr<std::string> PyStrFormat(std::string_view fmt, const std::vector<Value>& positional,
                                        const std::vector<std::pair<std::string, Value>>& keywords,
                                        size_t max_bytes);

// format(v, spec).
absl::StatusOr<std::string> PyFormatValue(const Value& v, std::string_view spec, size_t max_bytes);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_PY_FORMAT_STRING_H_
