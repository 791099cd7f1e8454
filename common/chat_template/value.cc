#include "common/chat_template/value.h"

#include <cmath>
#include <cstring>

namespace pagellm::chat_template {
namespace {

const std::string& EmptyString() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}

// The canonical form of a dict key: equal (Python ==) keys have equal forms. Ints, bools and
// floats with an integral value are "i<decimal>"; other floats "f<bits>"; strings "s<text>".
std::string CanonicalKey(const Value& key) {
  // Built by append: GCC 12 warns (-Wrestrict, falsely) on "s" + std::string.
  std::string out;
  switch (key.kind()) {
    case ValueKind::kString:
      out.reserve(key.AsString().size() + 1);
      out.push_back('s');
      out.append(key.AsString());
      return out;
    case ValueKind::kBool:
    case ValueKind::kInt:
      out.push_back('i');
      out.append(std::to_string(key.AsInt()));
      return out;
    case ValueKind::kFloat: {
      const double d = key.AsDouble();
      if (d == std::floor(d) && d >= -9.2e18 && d <= 9.2e18) {
        out.push_back('i');
        out.append(std::to_string(static_cast<int64_t>(d)));
        return out;
      }
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof(bits));
      out.push_back('f');
      out.append(std::to_string(bits));
      return out;
    }
    case ValueKind::kNone:
      out.push_back('n');
      return out;
    default:  // not a valid key; never equal to a valid one
      out.push_back('x');
      return out;
  }
}

}  // namespace

Value Value::Undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.str_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = ValueKind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = ValueKind::kBool;
  v.u_.b = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = ValueKind::kInt;
  v.u_.i = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = ValueKind::kFloat;
  v.u_.f = d;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = ValueKind::kString;
  if (!s.empty()) v.str_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::List(ListObject* list) {
  Value v;
  v.kind_ = ValueKind::kList;
  v.u_.list = list;
  return v;
}

Value Value::Dict(DictObject* dict) {
  Value v;
  v.kind_ = ValueKind::kDict;
  v.u_.dict = dict;
  return v;
}

Value Value::Namespace(DictObject* ns) {
  Value v;
  v.kind_ = ValueKind::kNamespace;
  v.u_.dict = ns;
  return v;
}

Value Value::Loop(LoopObject* loop) {
  Value v;
  v.kind_ = ValueKind::kLoop;
  v.u_.loop = loop;
  return v;
}

Value Value::Callable(CallableObject* fn) {
  Value v;
  v.kind_ = ValueKind::kCallable;
  v.u_.fn = fn;
  return v;
}

bool Value::is_tuple() const {
  return kind_ == ValueKind::kList && u_.list->seq == SeqKind::kTuple;
}

bool Value::is_sequence() const {
  return kind_ == ValueKind::kList &&
         (u_.list->seq == SeqKind::kList || u_.list->seq == SeqKind::kTuple);
}

double Value::AsDouble() const {
  return kind_ == ValueKind::kFloat ? u_.f : static_cast<double>(AsInt());
}

const std::string& Value::AsString() const { return str_ ? *str_ : EmptyString(); }

bool Value::Truthy() const {
  switch (kind_) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return false;
    case ValueKind::kBool:
      return u_.b;
    case ValueKind::kInt:
      return u_.i != 0;
    case ValueKind::kFloat:
      return u_.f != 0.0;
    case ValueKind::kString:
      return str_ && !str_->empty();
    case ValueKind::kList:
      return u_.list->seq == SeqKind::kIterator || !u_.list->items.empty();
    case ValueKind::kDict:
      return !u_.dict->entries.empty();
    case ValueKind::kNamespace:
    case ValueKind::kLoop:
    case ValueKind::kCallable:
      return true;
  }
  return false;
}

const char* Value::TypeName() const {
  switch (kind_) {
    case ValueKind::kUndefined:
      return "Undefined";
    case ValueKind::kNone:
      return "NoneType";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kString:
      return "str";
    case ValueKind::kList:
      return u_.list->type_name;
    case ValueKind::kDict:
      return "dict";
    case ValueKind::kNamespace:
      return "Namespace";
    case ValueKind::kLoop:
      return "LoopContext";
    case ValueKind::kCallable:
      switch (u_.fn->kind) {
        case CallableKind::kMacro:
          return "Macro";
        case CallableKind::kJoiner:
          return "Joiner";
        case CallableKind::kCycler:
          return "Cycler";
        case CallableKind::kBuiltin:
          break;
      }
      return "builtin_function_or_method";
  }
  return "object";
}

const Value* DictObject::Find(const Value& key) const {
  auto it = index.find(CanonicalKey(key));
  return it == index.end() ? nullptr : &entries[it->second].second;
}

const Value* DictObject::Find(std::string_view key) const {
  std::string canonical = "s";
  canonical.append(key);
  auto it = index.find(canonical);
  return it == index.end() ? nullptr : &entries[it->second].second;
}

void DictObject::Set(Value key, Value value) {
  auto [it, inserted] = index.try_emplace(CanonicalKey(key), entries.size());
  if (!inserted) {
    entries[it->second].second = std::move(value);
    return;
  }
  entries.emplace_back(std::move(key), std::move(value));
}

}  // namespace pagellm::chat_template
