// Jinja2's builtin filters (jinja2/filters.py) that chat templates use, plus transformers'
// `tojson` (json.dumps with ensure_ascii=False and no key sorting, unlike Jinja2's own).
// Filters that return generators in Jinja2 (map, select, selectattr, items, reverse) return
// single-use iterators here too (SeqKind::kIterator): true even when empty, no len(), consumed
// by the first loop over them.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/chat_template/access.h"
#include "common/chat_template/builtins.h"
#include "common/chat_template/filter_helpers.h"
#include "common/chat_template/operators.h"
#include "common/chat_template/py_format.h"
#include "common/chat_template/py_string.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {

absl::StatusOr<std::string> ToStr(RenderContext& ctx, const Value& v) {
  if (v.is_string()) return v.AsString();
  std::string s;
  RETURN_IF_ERROR(AppendPyStr(v, ctx.limits().max_string_bytes, &s));
  return s;
}

absl::Status NoArgs(std::string_view name, const CallArgs& args) {
  return BindArgs(name, args, {}, 0).status();
}

absl::StatusOr<Value> GetPath(RenderContext& ctx, const Value& item, const Value& attribute,
                              const std::optional<Value>& fallback) {
  Value v = item;
  if (attribute.is_integral()) {
    ASSIGN_OR_RETURN(v, GetItem(ctx, v, attribute));
  } else {
    if (!attribute.is_string()) {
      return absl::InvalidArgumentError("attribute must be a string or an integer");
    }
    for (const std::string& part : PySplit(attribute.AsString(), ".", -1, false)) {
      Value key = Value::String(part);
      if (!part.empty() && std::all_of(part.begin(), part.end(), ::isdigit) && part.size() < 18) {
        key = Value::Int(std::stoll(part));
      }
      ASSIGN_OR_RETURN(v, GetItem(ctx, v, key));
    }
  }
  if (v.is_undefined() && fallback) return *fallback;
  return v;
}

std::optional<double> ParseFloat(const std::string& text) {
  std::string s = PyStrip(text, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

Value IgnoreCase(const Value& v) {
  return v.is_string() ? Value::String(PyLower(v.AsString())) : v;
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

#define PAGELLM_FILTER(fn_name)                                                      \
  absl::StatusOr<Value> fn_name([[maybe_unused]] RenderContext& ctx, const Value& v, \
                                [[maybe_unused]] const CallArgs& args)

// A string argument, or unset.
absl::StatusOr<std::optional<std::string>> OptionalString(std::string_view function,
                                                          const std::optional<Value>& arg) {
  if (!arg || arg->is_none()) return std::nullopt;
  if (!arg->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(function), "() argument must be str or None, not ", arg->TypeName()));
  }
  return arg->AsString();
}

PAGELLM_FILTER(Abs) {
  RETURN_IF_ERROR(NoArgs("abs", args));
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad operand type for abs(): '", v.TypeName(), "'"));
  }
  if (v.kind() == ValueKind::kFloat) {
    return Value::Float(v.AsDouble() < 0 ? -v.AsDouble() : v.AsDouble());
  }
  return v.AsInt() < 0 ? ApplyUnary(true, v) : Value::Int(v.AsInt());
}

PAGELLM_FILTER(Attr) {
  ASSIGN_OR_RETURN(auto a, BindArgs("attr", args, {"name"}, 1));
  if (!a[0]->is_string()) return absl::InvalidArgumentError("attr name must be a string");
  return GetAttrOnly(ctx, v, a[0]->AsString());
}

PAGELLM_FILTER(Capitalize) {
  RETURN_IF_ERROR(NoArgs("capitalize", args));
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  return ctx.MakeString(PyCapitalize(s));
}

PAGELLM_FILTER(Default) {
  ASSIGN_OR_RETURN(auto a, BindArgs("default", args, {"default_value", "boolean"}, 0));
  const bool boolean = a[1] && a[1]->Truthy();
  if (v.is_undefined() || (boolean && !v.Truthy())) {
    return a[0] ? *a[0] : Value::String("");
  }
  return v;
}

PAGELLM_FILTER(Escape) {
  RETURN_IF_ERROR(NoArgs("escape", args));
  if (v.is_none()) return Value::String("None");
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  return ctx.MakeString(HtmlEscape(s));
}

PAGELLM_FILTER(First) {
  RETURN_IF_ERROR(NoArgs("first", args));
  if (v.kind() == ValueKind::kList && v.AsList()->seq == SeqKind::kIterator) {
    ListObject& it = *v.AsList();  // takes one item
    if (it.consumed < it.items.size()) return it.items[it.consumed++];
    return Value::Undefined("No first item, sequence was empty.");
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

PAGELLM_FILTER(Last) {
  RETURN_IF_ERROR(NoArgs("last", args));
  if (v.kind() == ValueKind::kList && v.AsList()->seq == SeqKind::kIterator) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", v.TypeName(), "' object is not reversible"));
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

PAGELLM_FILTER(Float) {
  ASSIGN_OR_RETURN(auto a, BindArgs("float", args, {"default"}, 0));
  const Value fallback = a[0] ? *a[0] : Value::Float(0.0);
  if (v.is_undefined()) return UndefinedError(v);  // float(Undefined) raises
  if (v.is_string()) RETURN_IF_ERROR(ctx.ChargeBytes(v.AsString().size()));
  if (v.is_number()) return Value::Float(v.AsDouble());
  if (v.is_string()) {
    std::optional<double> d = ParseFloat(v.AsString());
    if (d) return Value::Float(*d);
  }
  return fallback;
}

PAGELLM_FILTER(Int) {
  ASSIGN_OR_RETURN(auto a, BindArgs("int", args, {"default", "base"}, 0));
  const Value fallback = a[0] ? *a[0] : Value::Int(0);
  const int base = a[1] && a[1]->is_integral() ? static_cast<int>(a[1]->AsInt()) : 10;
  if (v.is_undefined()) return UndefinedError(v);  // int(Undefined) raises
  if (v.is_string()) RETURN_IF_ERROR(ctx.ChargeBytes(v.AsString().size()));
  if (v.is_integral()) return Value::Int(v.AsInt());
  if (v.kind() == ValueKind::kFloat) {
    const double d = v.AsDouble();
    if (!(d > -9.2e18 && d < 9.2e18)) return fallback;
    return Value::Int(static_cast<int64_t>(d));
  }
  if (!v.is_string()) return fallback;
  std::string s = PyStrip(v.AsString(), std::nullopt, true, true);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && s[i - 1] != '_') continue;
    digits += s[i];
  }
  if ((base == 16 || base == 0) && digits.size() > 2 && digits[0] == '0' &&
      (digits[1] == 'x' || digits[1] == 'X')) {
    digits = digits.substr(2);
    if (base == 0) return Value::Int(std::strtoll(digits.c_str(), nullptr, 16));
  }
  if (base >= 2 && base <= 36 && !digits.empty() && digits != "-" && digits != "+") {
    errno = 0;
    char* end = nullptr;
    const long long n = std::strtoll(digits.c_str(), &end, base);
    if (errno == 0 && end == digits.c_str() + digits.size()) return Value::Int(n);
  }
  std::optional<double> d = ParseFloat(v.AsString());
  if (d && *d > -9.2e18 && *d < 9.2e18) return Value::Int(static_cast<int64_t>(*d));
  return fallback;
}

PAGELLM_FILTER(Items) {
  RETURN_IF_ERROR(NoArgs("items", args));
  if (v.is_undefined()) return ctx.MakeList({}, SeqKind::kIterator);
  if (v.kind() != ValueKind::kDict) {
    return absl::InvalidArgumentError("Can only get item pairs from a mapping.");
  }
  std::vector<Value> pairs;
  for (const auto& [key, value] : v.AsDict()->entries) {
    ASSIGN_OR_RETURN(Value pair, ctx.MakeList({key, value}, SeqKind::kTuple));
    pairs.push_back(pair);
  }
  return ctx.MakeList(std::move(pairs), SeqKind::kIterator);
}

PAGELLM_FILTER(Join) {
  ASSIGN_OR_RETURN(auto a, BindArgs("join", args, {"d", "attribute"}, 0));
  std::string separator;
  if (a[0]) {
    ASSIGN_OR_RETURN(separator, ToStr(ctx, *a[0]));
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::string out;
  const size_t max = ctx.limits().max_string_bytes;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (a[1]) {
      ASSIGN_OR_RETURN(item, GetPath(ctx, item, *a[1], std::nullopt));
    }
    if (i > 0) out += separator;
    RETURN_IF_ERROR(AppendPyStr(item, max, &out));
    RETURN_IF_ERROR(ctx.CheckStringSize(out.size()));
  }
  return ctx.MakeString(std::move(out));
}

PAGELLM_FILTER(LengthFilter) {
  RETURN_IF_ERROR(NoArgs("length", args));
  ASSIGN_OR_RETURN(int64_t n, Length(ctx, v));
  return Value::Int(n);
}

PAGELLM_FILTER(List) {
  RETURN_IF_ERROR(NoArgs("list", args));
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  return ctx.MakeList(std::move(items));
}

PAGELLM_FILTER(Lower) {
  RETURN_IF_ERROR(NoArgs("lower", args));
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  return ctx.MakeString(PyLower(s));
}

PAGELLM_FILTER(Upper) {
  RETURN_IF_ERROR(NoArgs("upper", args));
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  return ctx.MakeString(PyUpper(s));
}

PAGELLM_FILTER(Title) {
  RETURN_IF_ERROR(NoArgs("title", args));
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  return ctx.MakeString(JinjaTitle(s));
}

PAGELLM_FILTER(Trim) {
  ASSIGN_OR_RETURN(auto a, BindArgs("trim", args, {"chars"}, 0));
  ASSIGN_OR_RETURN(std::optional<std::string> chars, OptionalString("trim", a[0]));
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  return ctx.MakeString(PyStrip(s, chars, true, true));
}

PAGELLM_FILTER(StringFilter) {
  RETURN_IF_ERROR(NoArgs("string", args));
  if (v.is_string()) return v;
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  return ctx.MakeString(std::move(s));
}

PAGELLM_FILTER(Safe) {
  RETURN_IF_ERROR(NoArgs("safe", args));
  if (v.is_string()) return v;
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  return ctx.MakeString(std::move(s));
}

PAGELLM_FILTER(Replace) {
  ASSIGN_OR_RETURN(auto a, BindArgs("replace", args, {"old", "new", "count"}, 2));
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  ASSIGN_OR_RETURN(std::string old_text, ToStr(ctx, *a[0]));
  ASSIGN_OR_RETURN(std::string new_text, ToStr(ctx, *a[1]));
  const int64_t count = a[2] && a[2]->is_integral() ? a[2]->AsInt() : -1;
  // Bound the result before building it: every match may grow the text by new_text.
  const uint64_t matches = old_text.empty() ? CodepointCount(s) + 1 : s.size() / old_text.size();
  RETURN_IF_ERROR(ctx.CheckStringSize(s.size() + matches * new_text.size()));
  return ctx.MakeString(PyReplace(s, old_text, new_text, count));
}

PAGELLM_FILTER(Reverse) {
  RETURN_IF_ERROR(NoArgs("reverse", args));
  if (v.is_string()) {
    std::vector<std::string_view> chars = SplitChars(v.AsString());
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out.append(*it);
    return ctx.MakeString(std::move(out));
  }
  // reversed(v) where Python has it (an iterator), else a reversed list of v's items.
  const char* type = nullptr;
  if (v.is_undefined() || v.is_tuple()) {
    type = "reversed";
  } else if (v.kind() == ValueKind::kDict) {
    type = "dict_reversekeyiterator";
  } else if (v.kind() == ValueKind::kList && v.AsList()->seq == SeqKind::kList) {
    type = "list_reverseiterator";
  } else if (v.kind() == ValueKind::kList && v.AsList()->seq == SeqKind::kView) {
    const std::string_view view = v.TypeName();
    type = view == "dict_keys"     ? "dict_reversekeyiterator"
           : view == "dict_values" ? "dict_reversevalueiterator"
                                   : "dict_reverseitemiterator";
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::reverse(items.begin(), items.end());
  if (type == nullptr) return ctx.MakeList(std::move(items));
  return ctx.MakeList(std::move(items), SeqKind::kIterator, type);
}

PAGELLM_FILTER(Sort) {
  ASSIGN_OR_RETURN(auto a, BindArgs("sort", args, {"reverse", "case_sensitive", "attribute"}, 0));
  const bool reverse = a[0] && a[0]->Truthy();
  const bool case_sensitive = a[1] && a[1]->Truthy();
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::vector<std::pair<Value, Value>> keyed;  // {sort key, item}
  for (const Value& item : items) {
    Value key = item;
    if (a[2]) {
      ASSIGN_OR_RETURN(key, GetPath(ctx, item, *a[2], std::nullopt));
    }
    if (!case_sensitive && key.is_string()) key = Value::String(PyLower(key.AsString()));
    keyed.emplace_back(key, item);
  }
  absl::Status error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    if (!error.ok()) return false;
    absl::StatusOr<bool> less =
        reverse ? PyLess(y.first, x.first, ctx) : PyLess(x.first, y.first, ctx);
    if (!less.ok()) {
      error = less.status();
      return false;
    }
    return *less;
  });
  RETURN_IF_ERROR(error);
  items.clear();
  for (auto& [key, item] : keyed) items.push_back(item);
  return ctx.MakeList(std::move(items));
}

PAGELLM_FILTER(ToJson) {
  ASSIGN_OR_RETURN(
      auto a, BindArgs("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}, 0));
  JsonOptions options;
  options.ensure_ascii = a[0] && a[0]->Truthy();
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) {
      options.indent = a[1]->AsString();
    } else if (a[1]->is_integral()) {
      options.indent = std::string(std::clamp<int64_t>(a[1]->AsInt(), 0, 64), ' ');
    } else {
      return absl::InvalidArgumentError("tojson indent must be an int or a string");
    }
    options.item_separator.assign(1, ',');  // assign(","): GCC 12 -Wrestrict false positive
  }
  if (a[2] && !a[2]->is_none()) {
    const Value& seps = *a[2];
    if (seps.kind() != ValueKind::kList || seps.AsList()->items.size() != 2 ||
        !seps.AsList()->items[0].is_string() || !seps.AsList()->items[1].is_string()) {
      return absl::InvalidArgumentError("tojson separators must be a pair of strings");
    }
    options.item_separator = seps.AsList()->items[0].AsString();
    options.key_separator = seps.AsList()->items[1].AsString();
  }
  options.sort_keys = a[3] && a[3]->Truthy();
  std::string out;
  RETURN_IF_ERROR(AppendJson(v, options, ctx.limits().max_string_bytes, &out));
  return ctx.MakeString(std::move(out));
}

PAGELLM_FILTER(Map) {
  std::optional<Value> attribute;
  std::optional<Value> fallback;
  for (const auto& [name, value] : args.keywords) {
    if (name == "attribute") {
      attribute = value;
    } else if (name == "default") {
      fallback = value;
    } else if (args.positional.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("map() got an unexpected keyword '", name, "'"));
    }
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::vector<Value> out;
  if (attribute) {
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value x, GetPath(ctx, item, *attribute, fallback));
      out.push_back(x);
    }
    return ctx.MakeList(std::move(out), SeqKind::kIterator);
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return absl::InvalidArgumentError("map requires a filter name or attribute=");
  }
  FilterFn filter = FindFilter(args.positional[0].AsString());
  if (filter == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no filter named '", args.positional[0].AsString(), "'"));
  }
  CallArgs rest{{args.positional.begin() + 1, args.positional.end()}, args.keywords};
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value x, filter(ctx, item, rest));
    out.push_back(x);
  }
  return ctx.MakeList(std::move(out), SeqKind::kIterator);
}

// select / reject / selectattr / rejectattr: keep items whose (attribute's) test result is
// `keep`; with no test name, the truth of the value is the test.
absl::StatusOr<Value> SelectOrReject(RenderContext& ctx, const Value& v, const CallArgs& args,
                                     bool by_attribute, bool keep) {
  size_t next = 0;
  std::optional<Value> attribute;
  if (by_attribute) {
    if (args.positional.empty()) {
      return absl::InvalidArgumentError("Missing parameter for attribute name");
    }
    attribute = args.positional[next++];
  }
  std::optional<std::string> test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) {
      return absl::InvalidArgumentError("test name must be a string");
    }
    test = args.positional[next++].AsString();
  }
  CallArgs test_args{{args.positional.begin() + next, args.positional.end()}, args.keywords};
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::vector<Value> out;
  for (const Value& item : items) {
    Value x = item;
    if (attribute) {
      ASSIGN_OR_RETURN(x, GetPath(ctx, item, *attribute, std::nullopt));
    }
    bool passed = x.Truthy();
    if (test) {
      ASSIGN_OR_RETURN(passed, CallTest(ctx, *test, x, test_args));
    }
    if (passed == keep) out.push_back(item);
  }
  return ctx.MakeList(std::move(out), SeqKind::kIterator);
}

PAGELLM_FILTER(Select) { return SelectOrReject(ctx, v, args, false, true); }
PAGELLM_FILTER(Reject) { return SelectOrReject(ctx, v, args, false, false); }
PAGELLM_FILTER(SelectAttr) { return SelectOrReject(ctx, v, args, true, true); }
PAGELLM_FILTER(RejectAttr) { return SelectOrReject(ctx, v, args, true, false); }

// Jinja2's make_attrgetter(attribute, postprocess=ignore_case unless case_sensitive).
absl::StatusOr<Value> SortKey(RenderContext& ctx, const Value& item,
                              const std::optional<Value>& attribute, bool case_sensitive) {
  Value key = item;
  if (attribute && !attribute->is_none()) {
    ASSIGN_OR_RETURN(key, GetPath(ctx, item, *attribute, std::nullopt));
  }
  return case_sensitive ? key : IgnoreCase(key);
}

absl::StatusOr<Value> MinOrMax(RenderContext& ctx, const Value& v, const CallArgs& args, bool max) {
  const std::string_view name = max ? "max" : "min";
  ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"case_sensitive", "attribute"}, 0));
  const bool case_sensitive = a[0] && a[0]->Truthy();
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  ASSIGN_OR_RETURN(Value best_key, SortKey(ctx, items[0], a[1], case_sensitive));
  for (size_t i = 1; i < items.size(); ++i) {
    ASSIGN_OR_RETURN(Value key, SortKey(ctx, items[i], a[1], case_sensitive));
    // Python's min/max keep the first of equal items.
    ASSIGN_OR_RETURN(bool better, max ? PyLess(best_key, key, ctx) : PyLess(key, best_key, ctx));
    if (better) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

PAGELLM_FILTER(Min) { return MinOrMax(ctx, v, args, false); }
PAGELLM_FILTER(Max) { return MinOrMax(ctx, v, args, true); }

PAGELLM_FILTER(Unique) {
  ASSIGN_OR_RETURN(auto a, BindArgs("unique", args, {"case_sensitive", "attribute"}, 0));
  const bool case_sensitive = a[0] && a[0]->Truthy();
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::vector<Value> seen, out;
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value key, SortKey(ctx, item, a[1], case_sensitive));
    RETURN_IF_ERROR(ValidateKey(key));  // Python keeps the keys in a set
    RETURN_IF_ERROR(ctx.ChargeSteps(seen.size()));
    bool found = false;
    for (const Value& s : seen) {
      ASSIGN_OR_RETURN(found, PyEquals(s, key, ctx));
      if (found) break;
    }
    if (found) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return ctx.MakeList(std::move(out), SeqKind::kIterator);
}

PAGELLM_FILTER(Sum) {
  ASSIGN_OR_RETURN(auto a, BindArgs("sum", args, {"attribute", "start"}, 0));
  Value total = a[1] ? *a[1] : Value::Int(0);
  if (total.is_string()) {
    return absl::InvalidArgumentError("sum() can't sum strings [use ''.join(seq) instead]");
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  for (const Value& item : items) {
    Value x = item;
    if (a[0] && !a[0]->is_none()) {
      ASSIGN_OR_RETURN(x, GetPath(ctx, item, *a[0], std::nullopt));
    }
    ASSIGN_OR_RETURN(total, ApplyBinary(BinaryOp::kAdd, total, x, ctx));
  }
  return total;
}

PAGELLM_FILTER(Round) {
  ASSIGN_OR_RETURN(auto a, BindArgs("round", args, {"precision", "method"}, 0));
  std::string method = "common";
  if (a[1]) {
    if (!a[1]->is_string())
      return absl::InvalidArgumentError("method must be common, ceil or floor");
    method = a[1]->AsString();
  }
  if (method != "common" && method != "ceil" && method != "floor") {
    return absl::InvalidArgumentError("method must be common, ceil or floor");
  }
  if (a[0] && !a[0]->is_integral()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", a[0]->TypeName(), "' object cannot be interpreted as an integer"));
  }
  const int64_t precision = a[0] ? a[0]->AsInt() : 0;
  if (!v.is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("type ", v.TypeName(), " doesn't define __round__ method"));
  }
  if (method != "common") {
    // func(value * 10**precision) / 10**precision: always a float.
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double scaled = v.AsDouble() * scale;
    if (!std::isfinite(scaled)) {
      return absl::InvalidArgumentError("cannot convert float infinity or NaN to integer");
    }
    return Value::Float((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
  }
  if (v.is_integral()) {  // round(int, ndigits) is an int, ties to even
    const int64_t i = v.AsInt();
    if (precision >= 0) return Value::Int(i);
    if (precision < -18) return Value::Int(0);
    int64_t m = 1;
    for (int64_t k = 0; k < -precision; ++k) m *= 10;
    int64_t q = i / m, r = i % m;
    if (r < 0) {
      r += m;
      --q;
    }
    if (2 * r > m || (2 * r == m && q % 2 != 0)) ++q;
    return Value::Int(q * m);
  }
  const double d = v.AsDouble();
  if (!std::isfinite(d) || precision > 330) return Value::Float(d);
  if (precision < 0) {
    const double m = std::pow(10.0, static_cast<double>(-precision));
    return Value::Float(std::nearbyint(d / m) * m);
  }
  // printf rounds the exact binary value half to even, as Python's round does.
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), d);
  return Value::Float(std::strtod(buf, nullptr));
}

// The byte length of the first `n` code points of `s`.
size_t CodepointPrefix(std::string_view s, size_t n) {
  size_t pos = 0;
  for (size_t i = 0; i < n && pos < s.size(); ++i) NextCodepoint(s, &pos);
  return pos;
}

PAGELLM_FILTER(Truncate) {
  ASSIGN_OR_RETURN(auto a, BindArgs("truncate", args, {"length", "killwords", "end", "leeway"}, 0));
  for (int i : {0, 3}) {
    if (a[i] && !a[i]->is_integral()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", a[i]->TypeName(), "' object cannot be interpreted as an integer"));
    }
  }
  const int64_t length = a[0] ? a[0]->AsInt() : 255;
  const bool killwords = a[1] && a[1]->Truthy();
  std::string end = "...";
  if (a[2]) {
    if (!a[2]->is_string()) return absl::InvalidArgumentError("end must be a string");
    end = a[2]->AsString();
  }
  const int64_t leeway = a[3] ? a[3]->AsInt() : 5;  // Jinja2's truncate.leeway policy
  const auto end_len = static_cast<int64_t>(CodepointCount(end));
  if (length < end_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected length >= ", end_len, ", got ", length));
  }
  if (leeway < 0)
    return absl::InvalidArgumentError(absl::StrCat("expected leeway >= 0, got ", leeway));
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  if (static_cast<int64_t>(CodepointCount(s)) <= length + leeway) return ctx.MakeString(s);
  std::string kept = s.substr(0, CodepointPrefix(s, static_cast<size_t>(length - end_len)));
  if (!killwords) {
    const size_t space = kept.rfind(' ');
    if (space != std::string::npos) kept.resize(space);
  }
  return ctx.MakeString(kept + end);
}

PAGELLM_FILTER(Indent) {
  ASSIGN_OR_RETURN(auto a, BindArgs("indent", args, {"width", "first", "blank"}, 0));
  std::string indention = "    ";
  if (a[0]) {
    if (a[0]->is_string()) {
      indention = a[0]->AsString();
    } else if (a[0]->is_integral()) {
      const int64_t w = a[0]->AsInt();
      RETURN_IF_ERROR(ctx.CheckStringSize(w > 0 ? static_cast<uint64_t>(w) : 0));
      indention.assign(w > 0 ? static_cast<size_t>(w) : 0, ' ');
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("can't multiply sequence by non-int of type '", a[0]->TypeName(), "'"));
    }
  }
  const bool first = a[1] && a[1]->Truthy();
  const bool blank = a[2] && a[2]->Truthy();
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  s += '\n';  // Jinja2's quirk for splitlines
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  const std::vector<std::string_view> lines = PySplitLines(s, false);
  RETURN_IF_ERROR(ctx.CheckStringSize(s.size() + (lines.size() + 1) * indention.size()));
  std::string out = first ? indention : "";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (blank || !lines[i].empty()) out += indention;
    }
    out.append(lines[i]);
  }
  return ctx.MakeString(std::move(out));
}

PAGELLM_FILTER(Center) {
  ASSIGN_OR_RETURN(auto a, BindArgs("center", args, {"width"}, 0));
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  const Value str = v.is_string() ? v : Value::String(std::move(s));
  CallArgs method_args;
  method_args.positional.push_back(a[0] ? *a[0] : Value::Int(80));
  return FindMethod(str, "center")(ctx, str, method_args);
}

#undef PAGELLM_FILTER

struct NamedFilter {
  std::string_view name;
  FilterFn fn;
};

constexpr NamedFilter kFilters[] = {
    {"abs", Abs},
    {"attr", Attr},
    {"capitalize", Capitalize},
    {"center", Center},
    {"count", LengthFilter},
    {"d", Default},
    {"default", Default},
    {"e", Escape},
    {"escape", Escape},
    {"first", First},
    {"float", Float},
    {"indent", Indent},
    {"int", Int},
    {"items", Items},
    {"join", Join},
    {"last", Last},
    {"length", LengthFilter},
    {"list", List},
    {"lower", Lower},
    {"map", Map},
    {"max", Max},
    {"min", Min},
    {"reject", Reject},
    {"rejectattr", RejectAttr},
    {"replace", Replace},
    {"reverse", Reverse},
    {"round", Round},
    {"safe", Safe},
    {"select", Select},
    {"selectattr", SelectAttr},
    {"sort", Sort},
    {"string", StringFilter},
    {"sum", Sum},
    {"title", Title},
    {"tojson", ToJson},
    {"trim", Trim},
    {"truncate", Truncate},
    {"unique", Unique},
    {"upper", Upper},
};

}  // namespace

FilterFn FindFilter(std::string_view name) {
  for (const NamedFilter& f : kFilters) {
    if (f.name == name) return f.fn;
  }
  if (FilterFn fn = FindGroupingFilter(name); fn != nullptr) return fn;
  return FindTextFilter(name);
}

}  // namespace pagellm::chat_template
