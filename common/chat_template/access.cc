// Undefined hints copy Jinja2's messages: "'dict object' has no attribute 'x'" for a missing
// name, "list object has no element 5" for a missing index.
#include "common/chat_template/access.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/chat_template/ast.h"
#include "common/chat_template/builtins.h"
#include "common/chat_template/operators.h"
#include "common/chat_template/py_format.h"
#include "common/chat_template/py_string.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {
namespace {

// Jinja2's object_type_repr.
std::string ObjectTypeRepr(const Value& obj) {
  if (obj.is_none()) return "None";
  if (obj.kind() == ValueKind::kNamespace) return "jinja2.utils.Namespace object";
  if (obj.kind() == ValueKind::kLoop) return "jinja2.runtime.LoopContext object";
  return absl::StrCat(obj.TypeName(), " object");
}

Value MissingAttribute(const Value& obj, std::string_view name) {
  return Value::Undefined(
      absl::StrCat("'", ObjectTypeRepr(obj), "' has no attribute ", PyStringRepr(name)));
}

Value MissingElement(const Value& obj, const Value& key) {
  std::string key_repr;
  if (!AppendPyRepr(key, 200, &key_repr).ok()) key_repr = "...";
  return Value::Undefined(absl::StrCat(ObjectTypeRepr(obj), " has no element ", key_repr));
}

absl::StatusOr<Value> LoopAttr(const LoopObject& loop, std::string_view name) {
  const auto& items = loop.items->items;
  const int64_t n = static_cast<int64_t>(items.size());
  const int64_t i = loop.index0;
  if (name == "index") return Value::Int(i + 1);
  if (name == "index0") return Value::Int(i);
  if (name == "revindex") return Value::Int(n - i);
  if (name == "revindex0") return Value::Int(n - i - 1);
  if (name == "first") return Value::Bool(i == 0);
  if (name == "last") return Value::Bool(i == n - 1);
  if (name == "length") return Value::Int(n);
  if (name == "depth") return Value::Int(loop.depth0 + 1);
  if (name == "depth0") return Value::Int(loop.depth0);
  if (name == "previtem") {
    return i > 0 ? items[i - 1] : Value::Undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item");
  }
  return Value::Undefined(
      absl::StrCat("'jinja2.runtime.LoopContext object' has no attribute ", PyStringRepr(name)));
}

// Python index `i` into a sequence of `n` items, or -1 when out of range.
int64_t NormalizeIndex(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return i >= 0 && i < n ? i : -1;
}

// PySlice_AdjustIndices: clamps a slice bound for a sequence of length n.
int64_t SliceBound(const std::optional<Value>& v, int64_t n, int64_t step, bool is_start) {
  if (!v || v->is_none()) {
    if (step > 0) return is_start ? 0 : n;
    return is_start ? n - 1 : -1;
  }
  int64_t x = v->AsInt();
  if (x < 0) {
    x += n;
    if (x < 0) x = step < 0 ? -1 : 0;
  } else if (x >= n) {
    x = step < 0 ? n - 1 : n;
  }
  return x;
}

// Attributes of macros (jinja2.runtime.Macro), joiners and cyclers.
absl::StatusOr<Value> CallableAttr(RenderContext& ctx, const Value& obj, std::string_view name) {
  const CallableObject& fn = *obj.AsCallable();
  switch (fn.kind) {
    case CallableKind::kMacro: {
      const Stmt& macro = *fn.macro;
      if (name == "name") return Value::String(macro.name);
      if (name == "arguments") {
        std::vector<Value> params;
        for (const std::string& p : macro.params) params.push_back(Value::String(p));
        return ctx.MakeList(std::move(params), SeqKind::kTuple);
      }
      if (name == "catch_kwargs") return Value::Bool(macro.accesses_kwargs);
      if (name == "catch_varargs") return Value::Bool(macro.accesses_varargs);
      if (name == "caller") return Value::Bool(macro.accesses_caller);
      break;
    }
    case CallableKind::kJoiner:
      if (name == "sep") return fn.self;
      if (name == "used") return Value::Bool(fn.used);
      break;
    case CallableKind::kCycler:
      if (name == "current") return fn.items[fn.position];
      if (name == "pos") return Value::Int(static_cast<int64_t>(fn.position));
      if (name == "items") return ctx.MakeList(fn.items, SeqKind::kTuple);
      break;
    case CallableKind::kBuiltin:
      break;
  }
  return MissingAttribute(obj, name);
}

}  // namespace

absl::StatusOr<Value> GetAttr(RenderContext& ctx, const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (FindMethod(obj, name) != nullptr) {
    return Value::Callable(ctx.heap().NewCallable(std::string(name), obj));
  }
  switch (obj.kind()) {
    case ValueKind::kCallable:
      return CallableAttr(ctx, obj, name);
    case ValueKind::kList:
      // groupby's items: (grouper, list) tuples with those names as attributes.
      if (obj.AsList()->type_name == std::string_view(kGroupTupleType)) {
        if (name == "grouper") return obj.AsList()->items[0];
        if (name == "list") return obj.AsList()->items[1];
      }
      return MissingAttribute(obj, name);
    case ValueKind::kDict:
    case ValueKind::kNamespace: {
      const Value* v = obj.AsDict()->Find(name);
      return v != nullptr ? *v : MissingAttribute(obj, name);
    }
    case ValueKind::kLoop:
      return LoopAttr(*obj.AsLoop(), name);
    default:
      return MissingAttribute(obj, name);
  }
}

absl::StatusOr<Value> GetAttrOnly(RenderContext& ctx, const Value& obj, std::string_view name) {
  if (obj.kind() == ValueKind::kDict && FindMethod(obj, name) == nullptr) {
    return MissingAttribute(obj, name);
  }
  return GetAttr(ctx, obj, name);
}

absl::StatusOr<Value> GetItem(RenderContext& ctx, const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  switch (obj.kind()) {
    case ValueKind::kList:
      if (key.is_integral() && obj.is_sequence()) {
        const auto& items = obj.AsList()->items;
        const int64_t i = NormalizeIndex(key.AsInt(), static_cast<int64_t>(items.size()));
        if (i >= 0) return items[i];
        return MissingElement(obj, key);
      }
      break;
    case ValueKind::kString:
      if (key.is_integral()) {
        RETURN_IF_ERROR(ctx.ChargeBytes(obj.AsString().size()));
        std::vector<std::string_view> chars = SplitChars(obj.AsString());
        const int64_t i = NormalizeIndex(key.AsInt(), static_cast<int64_t>(chars.size()));
        if (i >= 0) return ctx.MakeString(std::string(chars[i]));
        return MissingElement(obj, key);
      }
      break;
    case ValueKind::kDict:
      if (ValidateKey(key).ok()) {
        if (key.is_string()) RETURN_IF_ERROR(ctx.ChargeBytes(key.AsString().size()));
        const Value* v = obj.AsDict()->Find(key);
        if (v != nullptr) return *v;
      }
      break;
    default:
      break;
  }
  // Jinja2 falls back to the attribute for string keys.
  if (key.is_string()) {
    if (FindMethod(obj, key.AsString()) != nullptr) return GetAttr(ctx, obj, key.AsString());
    if (obj.kind() == ValueKind::kNamespace || obj.kind() == ValueKind::kLoop ||
        obj.kind() == ValueKind::kCallable ||
        (obj.kind() == ValueKind::kList &&
         obj.AsList()->type_name == std::string_view(kGroupTupleType))) {
      return GetAttr(ctx, obj, key.AsString());
    }
    return MissingAttribute(obj, key.AsString());
  }
  return MissingElement(obj, key);
}

absl::StatusOr<Value> GetSlice(RenderContext& ctx, const Value& obj,
                               const std::optional<Value>& start, const std::optional<Value>& stop,
                               const std::optional<Value>& step, bool folded) {
  // Jinja2 compiles slicing to Python's obj[a:b:c], bypassing its forgiving getitem: errors
  // are errors, not undefined values (except when folded, see access.h).
  auto type_error = [&](std::string message) -> absl::StatusOr<Value> {
    if (folded) return Value::Undefined(std::move(message));
    return absl::InvalidArgumentError(message);
  };
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.kind() == ValueKind::kDict) return type_error("unhashable type: 'slice'");
  if (!obj.is_sequence() && !obj.is_string()) {
    return type_error(absl::StrCat("'", obj.TypeName(), "' object is not subscriptable"));
  }
  for (const std::optional<Value>* bound : {&start, &stop, &step}) {
    if (*bound && (*bound)->is_undefined()) return UndefinedError(**bound);
    if (*bound && !(*bound)->is_none() && !(*bound)->is_integral()) {
      return type_error("slice indices must be integers or None or have an __index__ method");
    }
  }
  int64_t step_value = step && !step->is_none() ? step->AsInt() : 1;
  if (step_value == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  // Any step longer than a sequence picks one item: clamping keeps `i += step` from overflowing.
  constexpr int64_t kMaxStep = int64_t{1} << 40;
  step_value = std::clamp(step_value, -kMaxStep, kMaxStep);
  auto pick = [&](int64_t n, auto&& emit) {
    const int64_t begin = SliceBound(start, n, step_value, true);
    const int64_t end = SliceBound(stop, n, step_value, false);
    for (int64_t i = begin; step_value > 0 ? i < end : i > end; i += step_value) emit(i);
  };
  if (obj.kind() == ValueKind::kList) {
    const auto& items = obj.AsList()->items;
    std::vector<Value> out;
    pick(static_cast<int64_t>(items.size()), [&](int64_t i) { out.push_back(items[i]); });
    return ctx.MakeList(std::move(out), obj.AsList()->seq);
  }
  RETURN_IF_ERROR(ctx.ChargeBytes(obj.AsString().size()));
  std::vector<std::string_view> chars = SplitChars(obj.AsString());
  std::string out;
  pick(static_cast<int64_t>(chars.size()), [&](int64_t i) { out.append(chars[i]); });
  return ctx.MakeString(std::move(out));
}

absl::StatusOr<std::vector<Value>> Iterate(RenderContext& ctx, const Value& v) {
  std::vector<Value> items;
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return items;
    case ValueKind::kList: {
      ListObject& list = *v.AsList();
      RETURN_IF_ERROR(ctx.ChargeSteps(list.items.size()));
      if (list.seq != SeqKind::kIterator) return list.items;
      items.assign(list.items.begin() + list.consumed, list.items.end());
      list.consumed = list.items.size();
      return items;
    }
    case ValueKind::kDict:
      RETURN_IF_ERROR(ctx.ChargeSteps(v.AsDict()->entries.size()));
      for (const auto& entry : v.AsDict()->entries) items.push_back(entry.first);
      return items;
    case ValueKind::kString: {
      std::vector<std::string_view> chars = SplitChars(v.AsString());
      RETURN_IF_ERROR(ctx.ChargeSteps(chars.size()));
      for (std::string_view c : chars) items.push_back(Value::String(std::string(c)));
      return items;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("'", v.TypeName(), "' object is not iterable"));
  }
}

absl::StatusOr<int64_t> Length(RenderContext& ctx, const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return 0;
    case ValueKind::kString:
      RETURN_IF_ERROR(ctx.ChargeBytes(v.AsString().size()));
      return static_cast<int64_t>(CodepointCount(v.AsString()));
    case ValueKind::kList:
      if (v.AsList()->seq == SeqKind::kIterator) {
        return absl::InvalidArgumentError(
            absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
      }
      return static_cast<int64_t>(v.AsList()->items.size());
    case ValueKind::kDict:
      return static_cast<int64_t>(v.AsDict()->entries.size());
    case ValueKind::kLoop:
      return static_cast<int64_t>(v.AsLoop()->items->items.size());
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
  }
}

}  // namespace pagellm::chat_template
