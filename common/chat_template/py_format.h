// Text forms of interpreter values, byte-compatible with CPython where chat templates can see
// them: str() (what `{{ x }}` prints), repr() (how items of a printed list look) and
// json.dumps() (the `tojson` filter as transformers defines it).
//
// Every function appends to `out` and fails (InvalidArgument, `out` partly written) when the text
// would exceed `max_bytes`, when the value nests deeper than kMaxFormatDepth (a cycle built
// through a namespace does), or, for JSON, on a value JSON cannot hold (undefined, namespace).
// Known differences from CPython: repr() escapes only the non-printable characters listed in
// py_format.cc (CPython consults the full Unicode database); a self-containing namespace is an
// error where CPython prints "{...}".
//
// All functions are pure and thread-safe (for values of one render, on that render's thread).
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_PY_FORMAT_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_PY_FORMAT_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/chat_template/value.h"

namespace pagellm::chat_template {

inline constexpr int kMaxFormatDepth = 100;

// repr(float) / str(float): "1.0", "0.0001", "1e-05", "1e+16", "inf", "nan".
std::string FormatPyFloat(double d);

// repr(str): quoted with ' (or " when the text has ' but no "), with escapes.
std::string PyStringRepr(std::string_view s);

// str(v): undefined prints as "", strings as themselves, everything else as repr().
absl::Status AppendPyStr(const Value& v, size_t max_bytes, std::string* out);

// repr(v).
absl::Status AppendPyRepr(const Value& v, size_t max_bytes, std::string* out);

// json.dumps options; `indent` unset is Python's indent=None (one line).
struct JsonOptions {
  std::optional<std::string> indent;  // the string repeated per level (indent=2 is "  ")
  bool ensure_ascii = false;          // transformers' tojson default
  bool sort_keys = false;
  std::string item_separator = ", ";  // "," when indent is set (Python's default)
  std::string key_separator = ": ";
};

// json.dumps(v, ...). Tuples become arrays; dict keys that are numbers, bools or none become
// strings as Python converts them.
absl::Status AppendJson(const Value& v, const JsonOptions& options, size_t max_bytes,
                        std::string* out);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_PY_FORMAT_H_
