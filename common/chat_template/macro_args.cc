#include "common/chat_template/macro_args.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/chat_template/py_format.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {

absl::StatusOr<MacroArgs> BindMacroArgs(RenderContext& ctx, const Stmt& macro,
                                        const CallArgs& args) {
  const size_t n = macro.params.size();
  const std::string name = PyStringRepr(macro.name);
  MacroArgs bound;
  bound.params.resize(n);
  const size_t off = std::min(args.positional.size(), n);
  for (size_t i = 0; i < off; ++i) bound.params[i] = args.positional[i];
  // The keywords not consumed yet, in call order (a Python dict).
  std::vector<std::pair<std::string, Value>> kwargs;
  for (const auto& [key, value] : args.keywords) {
    for (const auto& [seen, unused] : kwargs) {
      if (seen == key) {
        return absl::InvalidArgumentError(
            absl::StrCat("macro ", name, " got multiple values for keyword argument '", key, "'"));
      }
    }
    kwargs.emplace_back(key, value);
  }
  auto pop = [&](std::string_view key) -> std::optional<Value> {
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
      if (it->first == key) {
        Value v = std::move(it->second);
        kwargs.erase(it);
        return v;
      }
    }
    return std::nullopt;
  };
  for (size_t i = off; i < n; ++i) bound.params[i] = pop(macro.params[i]);
  if (macro.accesses_caller) {
    std::optional<Value> caller = pop("caller");
    bound.caller = caller && !caller->is_none() ? *caller : Value::Undefined("No caller defined");
  }
  if (macro.accesses_kwargs) {
    Value dict = ctx.MakeDict();
    RETURN_IF_ERROR(ctx.ChargeSteps(kwargs.size()));
    for (auto& [key, value] : kwargs) dict.AsDict()->Set(Value::String(key), std::move(value));
    bound.kwargs = dict;
  } else if (!kwargs.empty()) {
    if (std::any_of(kwargs.begin(), kwargs.end(),
                    [](const auto& kw) { return kw.first == "caller"; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("macro ", name,
                       " was invoked with two values for the special caller argument. This is "
                       "most likely a bug."));
    }
    return absl::InvalidArgumentError(absl::StrCat("macro ", name, " takes no keyword argument ",
                                                   PyStringRepr(kwargs.front().first)));
  }
  if (macro.accesses_varargs) {
    std::vector<Value> rest;
    if (args.positional.size() > n) rest.assign(args.positional.begin() + n, args.positional.end());
    ASSIGN_OR_RETURN(bound.varargs, ctx.MakeList(std::move(rest), SeqKind::kTuple));
  } else if (args.positional.size() > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("macro ", name, " takes not more than ", n, " argument(s)"));
  }
  return bound;
}

}  // namespace pagellm::chat_template
