// Argument binding shared by all builtins, and the global functions: Jinja2's range (capped at
// the sandbox's MAX_RANGE), namespace and dict, and transformers' raise_exception.
#include "common/chat_template/builtins.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/chat_template/operators.h"
#include "common/chat_template/py_format.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {
namespace {

// jinja2.sandbox.MAX_RANGE.
constexpr int64_t kMaxRange = 100000;

absl::StatusOr<Value> Range(RenderContext& ctx, const CallArgs& args) {
  if (!args.keywords.empty()) {
    return absl::InvalidArgumentError("range() takes no keyword arguments");
  }
  if (args.positional.empty() || args.positional.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("range expected at most 3 arguments, got ", args.positional.size()));
  }
  for (const Value& v : args.positional) {
    if (v.is_undefined()) return UndefinedError(v);
    if (!v.is_integral()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", v.TypeName(), "' object cannot be interpreted as an integer"));
    }
  }
  const auto& p = args.positional;
  const int64_t start = p.size() == 1 ? 0 : p[0].AsInt();
  const int64_t stop = p.size() == 1 ? p[0].AsInt() : p[1].AsInt();
  const int64_t step = p.size() == 3 ? p[2].AsInt() : 1;
  if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
  // Length computed in floating point: no overflow, and exact enough to compare with the cap.
  const double span = step > 0 ? static_cast<double>(stop) - static_cast<double>(start)
                               : static_cast<double>(start) - static_cast<double>(stop);
  const double abs_step = step > 0 ? static_cast<double>(step) : -static_cast<double>(step);
  const double length = span <= 0 ? 0 : std::ceil(span / abs_step);
  if (length > kMaxRange) {
    return absl::InvalidArgumentError(
        "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  const int64_t n = static_cast<int64_t>(length);
  RETURN_IF_ERROR(ctx.CheckSteps(n));
  std::vector<Value> items;
  items.reserve(n);
  for (int64_t i = 0; i < n; ++i) items.push_back(Value::Int(start + i * step));
  return ctx.MakeList(std::move(items));
}

// Fills `dict` as Python's dict(*args, **kwargs) would, for a mapping argument.
absl::Status FillDict(RenderContext& ctx, std::string_view function, const CallArgs& args,
                      DictObject* dict) {
  if (args.positional.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(function), " expected at most 1 argument, got ", args.positional.size()));
  }
  if (args.positional.size() == 1) {
    const Value& init = args.positional[0];
    if (init.kind() != ValueKind::kDict) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(function), "() argument must be a mapping here, not ", init.TypeName()));
    }
    RETURN_IF_ERROR(ctx.ChargeSteps(init.AsDict()->entries.size()));
    for (const auto& [key, value] : init.AsDict()->entries) dict->Set(key, value);
  }
  RETURN_IF_ERROR(ctx.ChargeSteps(args.keywords.size()));
  for (const auto& [key, value] : args.keywords) dict->Set(Value::String(key), value);
  return absl::OkStatus();
}

absl::StatusOr<Value> Namespace(RenderContext& ctx, const CallArgs& args) {
  Value ns = ctx.MakeNamespace();
  RETURN_IF_ERROR(FillDict(ctx, "namespace", args, ns.AsDict()));
  return ns;
}

absl::StatusOr<Value> Dict(RenderContext& ctx, const CallArgs& args) {
  Value dict = ctx.MakeDict();
  RETURN_IF_ERROR(FillDict(ctx, "dict", args, dict.AsDict()));
  return dict;
}

absl::StatusOr<Value> RaiseException(RenderContext& ctx, const CallArgs& args) {
  ASSIGN_OR_RETURN(auto a, BindArgs("raise_exception", args, {"message"}, 1));
  std::string message;
  RETURN_IF_ERROR(AppendPyStr(*a[0], ctx.limits().max_string_bytes, &message));
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kRaisedByTemplatePayload, absl::Cord("1"));
  return status;
}

// transformers' strftime_now(format): datetime.now().strftime(format).
absl::StatusOr<Value> StrftimeNow(RenderContext& ctx, const CallArgs& args) {
  ASSIGN_OR_RETURN(auto a, BindArgs("strftime_now", args, {"format"}, 1));
  if (!a[0]->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("strftime() argument 1 must be str, not ", a[0]->TypeName()));
  }
  const std::string& format = a[0]->AsString();
  RETURN_IF_ERROR(ctx.ChargeBytes(format.size()));
  // No conversion writes more than 64 bytes per byte of format (%c, %x, ... are short).
  RETURN_IF_ERROR(ctx.CheckStringSize(format.size() * 64));
  return ctx.MakeString(absl::FormatTime(format, ctx.now(), ctx.time_zone()));
}

// Jinja2's joiner(sep=", "): a callable that returns "" the first time, then `sep`.
absl::StatusOr<Value> Joiner(RenderContext& ctx, const CallArgs& args) {
  ASSIGN_OR_RETURN(auto a, BindArgs("joiner", args, {"sep"}, 0));
  CallableObject* fn = ctx.heap().NewCallable("joiner", a[0] ? *a[0] : Value::String(", "));
  fn->kind = CallableKind::kJoiner;
  return Value::Callable(fn);
}

// Jinja2's cycler(*items): next() returns the items in turn, `current` the next one.
absl::StatusOr<Value> Cycler(RenderContext& ctx, const CallArgs& args) {
  if (!args.keywords.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Cycler.__init__() got an unexpected keyword argument '", args.keywords[0].first, "'"));
  }
  if (args.positional.empty()) {
    return absl::InvalidArgumentError("at least one item has to be provided");
  }
  RETURN_IF_ERROR(ctx.ChargeSteps(args.positional.size()));
  CallableObject* fn = ctx.heap().NewCallable("cycler", Value());
  fn->kind = CallableKind::kCycler;
  fn->items = args.positional;
  return Value::Callable(fn);
}

struct NamedGlobal {
  std::string_view name;
  GlobalFn fn;
};

constexpr NamedGlobal kGlobals[] = {
    {"range", Range},
    {"namespace", Namespace},
    {"dict", Dict},
    {"raise_exception", RaiseException},
    {"strftime_now", StrftimeNow},
    {"joiner", Joiner},
    {"cycler", Cycler},
};

}  // namespace

absl::StatusOr<std::vector<std::optional<Value>>> BindArgs(
    std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> params,
    size_t required) {
  std::vector<std::string_view> names(params);
  if (args.positional.size() > names.size()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(function), "() takes at most ",
                                                   names.size(), " argument(s) (",
                                                   args.positional.size(), " given)"));
  }
  std::vector<std::optional<Value>> bound(names.size());
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [key, value] : args.keywords) {
    size_t i = 0;
    while (i < names.size() && names[i] != key) ++i;
    if (i == names.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(function), "() got an unexpected keyword argument '", key, "'"));
    }
    if (bound[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(function), "() got multiple values for argument '", key, "'"));
    }
    bound[i] = value;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!bound[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(function), "() missing required argument '", std::string(names[i]), "'"));
    }
  }
  return bound;
}

GlobalFn FindGlobal(std::string_view name) {
  for (const NamedGlobal& g : kGlobals) {
    if (g.name == name) return g.fn;
  }
  return nullptr;
}

}  // namespace pagellm::chat_template
