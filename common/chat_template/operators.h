// Python operators on interpreter values, as Jinja2 applies them: arithmetic (+ - * / // % **),
// string concatenation (~), comparisons (== != < <= > >=), membership (in) and unary minus.
//
// Errors are InvalidArgument with Python's message: TypeError ("unsupported operand type(s) for
// +: 'int' and 'str'"), ZeroDivisionError ("division by zero"), and Jinja2's UndefinedError
// ("'foo' is undefined") for an undefined operand of anything but ==, !=, `in` and ~.
// `str % x` is printf-style formatting (py_format_string.h). Known difference: ints are
// 64-bit (overflow is an error, Python's ints grow).
//
// Thread-safety: as the values (see value.h).
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_OPERATORS_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_OPERATORS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/chat_template/render_context.h"
#include "common/chat_template/value.h"

namespace pagellm::chat_template {

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat };
enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

// The error of using an undefined value: its hint, or a generic message.
absl::Status UndefinedError(const Value& v);

// a OP b. New strings and lists are made through `ctx` (and count against its limits).
absl::StatusOr<Value> ApplyBinary(BinaryOp op, const Value& a, const Value& b, RenderContext& ctx);

// a OP b for comparison and membership operators. The work of comparing long strings and
// lists counts against `ctx`'s steps.
absl::StatusOr<bool> ApplyCompare(CompareOp op, const Value& a, const Value& b, RenderContext& ctx);

// -v (negate true) or +v.
absl::StatusOr<Value> ApplyUnary(bool negate, const Value& v);

// Python a == b (deep for lists and dicts; identity for namespaces). Fails on values nested
// deeper than kMaxFormatDepth, or when the comparison exhausts `ctx`'s steps.
absl::StatusOr<bool> PyEquals(const Value& a, const Value& b, RenderContext& ctx);

// Python a < b: numbers, strings (code point order) and same-type sequences; TypeError else.
absl::StatusOr<bool> PyLess(const Value& a, const Value& b, RenderContext& ctx);

// Python `item in container`: substring, list item, dict key; false for undefined. Consumes an
// iterator up to the item found.
absl::StatusOr<bool> PyContains(const Value& container, const Value& item, RenderContext& ctx);

// InvalidArgument unless `key` can be a dict key here (str, int, float, bool, none).
absl::Status ValidateKey(const Value& key);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_OPERATORS_H_
