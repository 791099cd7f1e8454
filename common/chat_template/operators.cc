// Arithmetic follows CPython's int and float objects: floor division and modulo round toward
// negative infinity (float_divmod's algorithm), int ** negative int is a float, bool operands
// are ints. Integer results that leave int64 fail instead of growing.
#include "common/chat_template/operators.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/chat_template/py_format.h"
#include "common/chat_template/py_format_string.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {
namespace {

std::string OpSymbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "**";
    case BinaryOp::kConcat:
      return "~";
  }
  return "?";
}

absl::Status Unsupported(BinaryOp op, const Value& a, const Value& b) {
  return absl::InvalidArgumentError(absl::StrCat("unsupported operand type(s) for ", OpSymbol(op),
                                                 ": '", a.TypeName(), "' and '", b.TypeName(),
                                                 "'"));
}

absl::Status Overflow() {
  return absl::InvalidArgumentError("integer overflow (this interpreter's ints are 64-bit)");
}

absl::Status ZeroDivision() { return absl::InvalidArgumentError("division by zero"); }

// CPython's float_divmod: returns {floor quotient, modulo}. REQUIRES: w != 0.
std::pair<double, double> FloatDivMod(double v, double w) {
  double mod = std::fmod(v, w);
  double div = (v - mod) / w;
  if (mod != 0.0) {
    if ((w < 0) != (mod < 0)) {
      mod += w;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, w);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, v / w);
  }
  return {floordiv, mod};
}

absl::StatusOr<Value> IntPow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return Overflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
  }
  return Value::Int(result);
}

absl::StatusOr<Value> Arithmetic(BinaryOp op, const Value& a, const Value& b) {
  const bool ints = a.is_integral() && b.is_integral();
  if (ints) {
    const int64_t x = a.AsInt();
    const int64_t y = b.AsInt();
    int64_t r = 0;
    switch (op) {
      case BinaryOp::kAdd:
        if (__builtin_add_overflow(x, y, &r)) return Overflow();
        return Value::Int(r);
      case BinaryOp::kSub:
        if (__builtin_sub_overflow(x, y, &r)) return Overflow();
        return Value::Int(r);
      case BinaryOp::kMul:
        if (__builtin_mul_overflow(x, y, &r)) return Overflow();
        return Value::Int(r);
      case BinaryOp::kFloorDiv:
      case BinaryOp::kMod: {
        if (y == 0) return ZeroDivision();
        if (x == std::numeric_limits<int64_t>::min() && y == -1) {
          if (op == BinaryOp::kMod) return Value::Int(0);
          return Overflow();
        }
        int64_t q = x / y;
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          q -= 1;
        }
        return Value::Int(op == BinaryOp::kFloorDiv ? q : m);
      }
      case BinaryOp::kPow:
        if (y >= 0) return IntPow(x, y);
        if (x == 0) {
          return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
        }
        return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      default:
        break;
    }
  }
  const double x = a.AsDouble();
  const double y = b.AsDouble();
  switch (op) {
    case BinaryOp::kAdd:
      return Value::Float(x + y);
    case BinaryOp::kSub:
      return Value::Float(x - y);
    case BinaryOp::kMul:
      return Value::Float(x * y);
    case BinaryOp::kDiv:
      if (y == 0) return ZeroDivision();
      return Value::Float(x / y);
    case BinaryOp::kFloorDiv:
      if (y == 0) return ZeroDivision();
      return Value::Float(FloatDivMod(x, y).first);
    case BinaryOp::kMod:
      if (y == 0) return ZeroDivision();
      return Value::Float(FloatDivMod(x, y).second);
    case BinaryOp::kPow:
      if (x == 0 && y < 0) {
        return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
      }
      if (x < 0 && y != std::floor(y)) {
        return absl::InvalidArgumentError("negative number raised to a fractional power");
      }
      return Value::Float(std::pow(x, y));
    default:
      return Unsupported(op, a, b);
  }
}

// s * n or list * n.
absl::StatusOr<Value> Repeat(const Value& seq, int64_t n, RenderContext& ctx) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.AsString();
    const uint64_t size = static_cast<uint64_t>(n) * s.size();
    if (!s.empty() && size / s.size() != static_cast<uint64_t>(n)) return Overflow();
    RETURN_IF_ERROR(ctx.CheckStringSize(size));
    std::string out;
    out.reserve(size);
    for (int64_t i = 0; i < n && !s.empty(); ++i) out += s;
    return ctx.MakeString(std::move(out));
  }
  const std::vector<Value>& items = seq.AsList()->items;
  const uint64_t size = static_cast<uint64_t>(n) * items.size();
  if (!items.empty() && size / items.size() != static_cast<uint64_t>(n)) return Overflow();
  RETURN_IF_ERROR(ctx.CheckSteps(size));
  std::vector<Value> out;
  out.reserve(size);
  for (int64_t i = 0; i < n && !items.empty(); ++i) {
    out.insert(out.end(), items.begin(), items.end());
  }
  return ctx.MakeList(std::move(out), seq.AsList()->seq);
}

absl::StatusOr<bool> Equals(const Value& a, const Value& b, int depth, RenderContext& ctx) {
  if (depth > kMaxFormatDepth) {
    return absl::InvalidArgumentError("values nested too deeply (or circular) to compare");
  }
  RETURN_IF_ERROR(ctx.ChargeSteps(1));
  if (a.is_number() && b.is_number()) {
    if (a.kind() == ValueKind::kFloat || b.kind() == ValueKind::kFloat) {
      return a.AsDouble() == b.AsDouble();
    }
    return a.AsInt() == b.AsInt();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return true;
    case ValueKind::kString:
      if (a.AsString().size() != b.AsString().size()) return false;
      RETURN_IF_ERROR(ctx.ChargeBytes(a.AsString().size()));
      return a.AsString() == b.AsString();
    case ValueKind::kList: {
      const ListObject& x = *a.AsList();
      const ListObject& y = *b.AsList();
      if (!a.is_sequence() || !b.is_sequence()) return &x == &y;  // iterators, views: identity
      if (x.seq != y.seq || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        ASSIGN_OR_RETURN(bool eq, Equals(x.items[i], y.items[i], depth + 1, ctx));
        if (!eq) return false;
      }
      return true;
    }
    case ValueKind::kDict: {
      const DictObject& x = *a.AsDict();
      const DictObject& y = *b.AsDict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [key, value] : x.entries) {
        const Value* other = y.Find(key);
        if (other == nullptr) return false;
        ASSIGN_OR_RETURN(bool eq, Equals(value, *other, depth + 1, ctx));
        if (!eq) return false;
      }
      return true;
    }
    case ValueKind::kNamespace:
      return a.AsDict() == b.AsDict();
    case ValueKind::kLoop:
      return a.AsLoop() == b.AsLoop();
    case ValueKind::kCallable:
      return a.AsCallable() == b.AsCallable();
    default:
      return false;
  }
}

absl::StatusOr<bool> Less(const Value& a, const Value& b, int depth, RenderContext& ctx) {
  if (depth > kMaxFormatDepth) {
    return absl::InvalidArgumentError("values nested too deeply (or circular) to compare");
  }
  RETURN_IF_ERROR(ctx.ChargeSteps(1));
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.AsInt() < b.AsInt();
    return a.AsDouble() < b.AsDouble();
  }
  if (a.is_string() && b.is_string()) {
    RETURN_IF_ERROR(ctx.ChargeBytes(std::min(a.AsString().size(), b.AsString().size())));
    return a.AsString() < b.AsString();
  }
  if (a.is_sequence() && b.is_sequence() && a.is_tuple() == b.is_tuple()) {
    const std::vector<Value>& x = a.AsList()->items;
    const std::vector<Value>& y = b.AsList()->items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      ASSIGN_OR_RETURN(bool eq, Equals(x[i], y[i], depth + 1, ctx));
      if (!eq) return Less(x[i], y[i], depth + 1, ctx);
    }
    return x.size() < y.size();
  }
  return absl::InvalidArgumentError(absl::StrCat("'<' not supported between instances of '",
                                                 a.TypeName(), "' and '", b.TypeName(), "'"));
}

}  // namespace

absl::Status UndefinedError(const Value& v) {
  const std::string& hint = v.AsString();
  return absl::InvalidArgumentError(hint.empty() ? "undefined value used" : hint);
}

absl::Status ValidateKey(const Value& key) {
  switch (key.kind()) {
    case ValueKind::kString:
    case ValueKind::kInt:
    case ValueKind::kFloat:
    case ValueKind::kBool:
    case ValueKind::kNone:
      return absl::OkStatus();
    case ValueKind::kUndefined:
      return UndefinedError(key);
    default:
      return absl::InvalidArgumentError(absl::StrCat("unhashable type: '", key.TypeName(), "'"));
  }
}

absl::StatusOr<Value> ApplyBinary(BinaryOp op, const Value& a, const Value& b, RenderContext& ctx) {
  if (op == BinaryOp::kConcat) {
    std::string s;
    const size_t max = ctx.limits().max_string_bytes;
    RETURN_IF_ERROR(AppendPyStr(a, max, &s));
    RETURN_IF_ERROR(AppendPyStr(b, max, &s));
    return ctx.MakeString(std::move(s));
  }
  if (op == BinaryOp::kMod && a.is_string()) {  // printf-style; str(undefined) is ""
    RETURN_IF_ERROR(ctx.ChargeBytes(a.AsString().size()));
    ASSIGN_OR_RETURN(std::string s,
                     PyPercentFormat(a.AsString(), b, ctx.limits().max_string_bytes));
    return ctx.MakeString(std::move(s));
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) return Arithmetic(op, a, b);
  if (op == BinaryOp::kAdd) {
    if (a.is_string() && b.is_string()) {
      RETURN_IF_ERROR(ctx.CheckStringSize(a.AsString().size() + b.AsString().size()));
      return ctx.MakeString(a.AsString() + b.AsString());
    }
    if (a.is_sequence() && b.is_sequence() && a.is_tuple() == b.is_tuple()) {
      const std::vector<Value>& x = a.AsList()->items;
      const std::vector<Value>& y = b.AsList()->items;
      RETURN_IF_ERROR(ctx.CheckSteps(x.size() + y.size()));
      std::vector<Value> items(x);
      items.insert(items.end(), y.begin(), y.end());
      return ctx.MakeList(std::move(items), a.AsList()->seq);
    }
  }
  if (op == BinaryOp::kMul) {
    const bool a_seq = a.is_string() || a.is_sequence();
    const bool b_seq = b.is_string() || b.is_sequence();
    if (a_seq && b.is_integral()) return Repeat(a, b.AsInt(), ctx);
    if (b_seq && a.is_integral()) return Repeat(b, a.AsInt(), ctx);
  }
  if (op == BinaryOp::kMod && a.is_string()) {
    return absl::InvalidArgumentError("printf-style string formatting (str % x) is not supported");
  }
  return Unsupported(op, a, b);
}

absl::StatusOr<bool> ApplyCompare(CompareOp op, const Value& a, const Value& b,
                                  RenderContext& ctx) {
  switch (op) {
    case CompareOp::kEq:
      return PyEquals(a, b, ctx);
    case CompareOp::kNe: {
      ASSIGN_OR_RETURN(bool eq, PyEquals(a, b, ctx));
      return !eq;
    }
    case CompareOp::kLt:
      return PyLess(a, b, ctx);
    case CompareOp::kGt:
      return PyLess(b, a, ctx);
    case CompareOp::kLe: {
      ASSIGN_OR_RETURN(bool gt, PyLess(b, a, ctx));
      return !gt;
    }
    case CompareOp::kGe: {
      ASSIGN_OR_RETURN(bool lt, PyLess(a, b, ctx));
      return !lt;
    }
    case CompareOp::kIn:
      return PyContains(b, a, ctx);
    case CompareOp::kNotIn: {
      ASSIGN_OR_RETURN(bool in, PyContains(b, a, ctx));
      return !in;
    }
  }
  return false;
}

absl::StatusOr<Value> ApplyUnary(bool negate, const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.kind() == ValueKind::kFloat) return Value::Float(negate ? -v.AsDouble() : v.AsDouble());
  if (v.is_integral()) {
    if (!negate) return Value::Int(v.AsInt());
    if (v.AsInt() == std::numeric_limits<int64_t>::min()) return Overflow();
    return Value::Int(-v.AsInt());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("bad operand type for unary ", negate ? "-" : "+", ": '", v.TypeName(), "'"));
}

absl::StatusOr<bool> PyEquals(const Value& a, const Value& b, RenderContext& ctx) {
  return Equals(a, b, 0, ctx);
}

absl::StatusOr<bool> PyLess(const Value& a, const Value& b, RenderContext& ctx) {
  return Less(a, b, 0, ctx);
}

absl::StatusOr<bool> PyContains(const Value& container, const Value& item, RenderContext& ctx) {
  switch (container.kind()) {
    case ValueKind::kUndefined:
      return false;
    case ValueKind::kString:
      if (!item.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'in <string>' requires string as left operand, not ", item.TypeName()));
      }
      RETURN_IF_ERROR(ctx.ChargeBytes(container.AsString().size()));
      return container.AsString().find(item.AsString()) != std::string::npos;
    case ValueKind::kList: {
      // An iterator is consumed up to the item found, as Python's `in` does.
      ListObject& list = *container.AsList();
      const bool iterator = list.seq == SeqKind::kIterator;
      for (size_t i = iterator ? list.consumed : 0; i < list.items.size(); ++i) {
        ASSIGN_OR_RETURN(bool eq, PyEquals(list.items[i], item, ctx));
        if (iterator) list.consumed = i + 1;
        if (eq) return true;
      }
      return false;
    }
    case ValueKind::kDict:
      if (item.is_undefined()) return false;  // hashable, and never a key
      RETURN_IF_ERROR(ValidateKey(item));
      if (item.is_string()) RETURN_IF_ERROR(ctx.ChargeBytes(item.AsString().size()));
      return container.AsDict()->Find(item) != nullptr;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("argument of type '", container.TypeName(), "' is not iterable"));
  }
}

}  // namespace pagellm::chat_template
