// Jinja2's builtin tests (jinja2/tests.py), with Python's type rules: bool counts as a number
// but not as an integer; undefined is iterable and a sequence (it iterates as empty).
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/chat_template/builtins.h"
#include "common/chat_template/operators.h"
#include "common/chat_template/py_string.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {
namespace {

// The single argument of a comparison-like test.
absl::StatusOr<Value> OneArg(std::string_view name, const CallArgs& args) {
  ASSIGN_OR_RETURN(auto bound, BindArgs(name, args, {"other"}, 1));
  return *bound[0];
}

absl::StatusOr<bool> Compare(RenderContext& ctx, std::string_view name, CompareOp op,
                             const Value& v, const CallArgs& args) {
  ASSIGN_OR_RETURN(Value other, OneArg(name, args));
  return ApplyCompare(op, v, other, ctx);
}

absl::StatusOr<bool> Parity(const Value& v, int64_t remainder) {
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_integral()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported operand type(s) for %: '", v.TypeName(), "' and 'int'"));
  }
  int64_t m = v.AsInt() % 2;
  if (m < 0) m += 2;
  return m == remainder;
}

#define PAGELLM_TEST(fn_name)                                                       \
  absl::StatusOr<bool> fn_name([[maybe_unused]] RenderContext& ctx, const Value& v, \
                               [[maybe_unused]] const CallArgs& args)

PAGELLM_TEST(Defined) { return !v.is_undefined(); }
PAGELLM_TEST(IsUndefined) { return v.is_undefined(); }
PAGELLM_TEST(None) { return v.is_none(); }
PAGELLM_TEST(Boolean) { return v.kind() == ValueKind::kBool; }
PAGELLM_TEST(False) { return v.kind() == ValueKind::kBool && !v.AsBool(); }
PAGELLM_TEST(True) { return v.kind() == ValueKind::kBool && v.AsBool(); }
PAGELLM_TEST(Integer) { return v.kind() == ValueKind::kInt; }
PAGELLM_TEST(Float) { return v.kind() == ValueKind::kFloat; }
PAGELLM_TEST(Number) { return v.is_number(); }
PAGELLM_TEST(String) { return v.is_string(); }
PAGELLM_TEST(Mapping) { return v.kind() == ValueKind::kDict; }
PAGELLM_TEST(Iterable) {
  const ValueKind k = v.kind();
  return k == ValueKind::kUndefined || k == ValueKind::kString || k == ValueKind::kList ||
         k == ValueKind::kDict || k == ValueKind::kLoop;
}
PAGELLM_TEST(Sequence) {  // len() and [] both work
  const ValueKind k = v.kind();
  return k == ValueKind::kUndefined || k == ValueKind::kString || v.is_sequence() ||
         k == ValueKind::kDict;
}
PAGELLM_TEST(Callable) {  // a cycler has methods but no __call__
  const ValueKind k = v.kind();
  if (k == ValueKind::kCallable) return v.AsCallable()->kind != CallableKind::kCycler;
  return k == ValueKind::kUndefined || k == ValueKind::kLoop;
}
PAGELLM_TEST(Odd) { return Parity(v, 1); }
PAGELLM_TEST(Even) { return Parity(v, 0); }
PAGELLM_TEST(DivisibleBy) {
  ASSIGN_OR_RETURN(Value num, OneArg("divisibleby", args));
  ASSIGN_OR_RETURN(Value m, ApplyBinary(BinaryOp::kMod, v, num, ctx));
  return PyEquals(m, Value::Int(0), ctx);
}
PAGELLM_TEST(Eq) { return Compare(ctx, "eq", CompareOp::kEq, v, args); }
PAGELLM_TEST(Ne) { return Compare(ctx, "ne", CompareOp::kNe, v, args); }
PAGELLM_TEST(Lt) { return Compare(ctx, "lt", CompareOp::kLt, v, args); }
PAGELLM_TEST(Le) { return Compare(ctx, "le", CompareOp::kLe, v, args); }
PAGELLM_TEST(Gt) { return Compare(ctx, "gt", CompareOp::kGt, v, args); }
PAGELLM_TEST(Ge) { return Compare(ctx, "ge", CompareOp::kGe, v, args); }
PAGELLM_TEST(In) { return Compare(ctx, "in", CompareOp::kIn, v, args); }
PAGELLM_TEST(Lower) {
  if (!v.is_string()) return false;
  RETURN_IF_ERROR(ctx.ChargeBytes(v.AsString().size()));
  return PyIsLower(v.AsString());
}
PAGELLM_TEST(Upper) {
  if (!v.is_string()) return false;
  RETURN_IF_ERROR(ctx.ChargeBytes(v.AsString().size()));
  return PyIsUpper(v.AsString());
}
PAGELLM_TEST(SameAs) {
  ASSIGN_OR_RETURN(Value other, OneArg("sameas", args));
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case ValueKind::kList:
      return v.AsList() == other.AsList();
    case ValueKind::kDict:
    case ValueKind::kNamespace:
      return v.AsDict() == other.AsDict();
    case ValueKind::kNone:
      return true;
    case ValueKind::kBool:
      return v.AsBool() == other.AsBool();
    default:
      return PyEquals(v, other, ctx);  // small ints and interned strings are `is`-identical
  }
}
PAGELLM_TEST(Escaped) { return false; }
PAGELLM_TEST(IsFilter) { return v.is_string() && FindFilter(v.AsString()) != nullptr; }
PAGELLM_TEST(IsTest) { return v.is_string() && FindTest(v.AsString()) != nullptr; }

#undef PAGELLM_TEST

struct NamedTest {
  std::string_view name;
  TestFn fn;
};

constexpr NamedTest kTests[] = {
    {"defined", Defined},
    {"undefined", IsUndefined},
    {"none", None},
    {"boolean", Boolean},
    {"false", False},
    {"true", True},
    {"integer", Integer},
    {"float", Float},
    {"number", Number},
    {"string", String},
    {"mapping", Mapping},
    {"iterable", Iterable},
    {"sequence", Sequence},
    {"callable", Callable},
    {"odd", Odd},
    {"even", Even},
    {"divisibleby", DivisibleBy},
    {"eq", Eq},
    {"equalto", Eq},
    {"==", Eq},
    {"ne", Ne},
    {"!=", Ne},
    {"lt", Lt},
    {"lessthan", Lt},
    {"<", Lt},
    {"le", Le},
    {"<=", Le},
    {"gt", Gt},
    {"greaterthan", Gt},
    {">", Gt},
    {"ge", Ge},
    {">=", Ge},
    {"in", In},
    {"lower", Lower},
    {"upper", Upper},
    {"sameas", SameAs},
    {"escaped", Escaped},
    {"filter", IsFilter},
    {"test", IsTest},
};

}  // namespace

TestFn FindTest(std::string_view name) {
  for (const NamedTest& t : kTests) {
    if (t.name == name) return t.fn;
  }
  return nullptr;
}

absl::StatusOr<bool> CallTest(RenderContext& ctx, std::string_view name, const Value& value,
                              const CallArgs& args) {
  TestFn fn = FindTest(name);
  if (fn == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no test named '", std::string(name), "'"));
  }
  return fn(ctx, value, args);
}

}  // namespace pagellm::chat_template
