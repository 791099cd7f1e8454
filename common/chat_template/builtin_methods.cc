// Python methods of str, list and dict that chat templates call, and the loop's cycle(). Mutating
// methods (list.append, dict.update, ...) are absent, as transformers' immutable sandbox
// forbids them.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/chat_template/access.h"
#include "common/chat_template/builtins.h"
#include "common/chat_template/operators.h"
#include "common/chat_template/py_chartype.h"
#include "common/chat_template/py_format_string.h"
#include "common/chat_template/py_string.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {
namespace {

#define PAGELLM_METHOD(fn_name)                                                         \
  absl::StatusOr<Value> fn_name([[maybe_unused]] RenderContext& ctx, const Value& self, \
                                [[maybe_unused]] const CallArgs& args)

absl::StatusOr<std::optional<std::string>> OptionalStr(std::string_view method,
                                                       const std::optional<Value>& arg) {
  if (!arg || arg->is_none()) return std::nullopt;
  if (!arg->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(method), "() argument must be str or None, not ", arg->TypeName()));
  }
  return arg->AsString();
}

absl::StatusOr<std::string> RequiredStr(std::string_view method, const Value& arg) {
  if (!arg.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("must be str, not ", arg.TypeName(), " (in ", std::string(method), "())"));
  }
  return arg.AsString();
}

absl::StatusOr<Value> Strip(RenderContext& ctx, const Value& self, const CallArgs& args,
                            std::string_view name, bool left, bool right) {
  ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"chars"}, 0));
  ASSIGN_OR_RETURN(std::optional<std::string> chars, OptionalStr(name, a[0]));
  return ctx.MakeString(PyStrip(self.AsString(), chars, left, right));
}

PAGELLM_METHOD(StrStrip) { return Strip(ctx, self, args, "strip", true, true); }
PAGELLM_METHOD(StrLStrip) { return Strip(ctx, self, args, "lstrip", true, false); }
PAGELLM_METHOD(StrRStrip) { return Strip(ctx, self, args, "rstrip", false, true); }

absl::StatusOr<Value> Affix(const Value& self, const CallArgs& args, bool prefix) {
  const std::string_view name = prefix ? "startswith" : "endswith";
  ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"affix"}, 1));
  std::vector<Value> candidates;
  if (a[0]->is_tuple()) {
    candidates = a[0]->AsList()->items;
  } else {
    candidates.push_back(*a[0]);
  }
  for (const Value& c : candidates) {
    ASSIGN_OR_RETURN(std::string affix, RequiredStr(name, c));
    if (prefix ? absl::StartsWith(self.AsString(), affix)
               : absl::EndsWith(self.AsString(), affix)) {
      return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

PAGELLM_METHOD(StrStartsWith) { return Affix(self, args, true); }
PAGELLM_METHOD(StrEndsWith) { return Affix(self, args, false); }

absl::StatusOr<Value> Transform(RenderContext& ctx, const Value& self, const CallArgs& args,
                                std::string_view name, std::string (*fn)(std::string_view)) {
  RETURN_IF_ERROR(BindArgs(name, args, {}, 0).status());
  return ctx.MakeString(fn(self.AsString()));
}

PAGELLM_METHOD(StrUpper) { return Transform(ctx, self, args, "upper", PyUpper); }
PAGELLM_METHOD(StrLower) { return Transform(ctx, self, args, "lower", PyLower); }
PAGELLM_METHOD(StrTitle) { return Transform(ctx, self, args, "title", PyTitle); }
PAGELLM_METHOD(StrCapitalize) { return Transform(ctx, self, args, "capitalize", PyCapitalize); }

absl::StatusOr<Value> Split(RenderContext& ctx, const Value& self, const CallArgs& args,
                            bool from_right) {
  const std::string_view name = from_right ? "rsplit" : "split";
  ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"sep", "maxsplit"}, 0));
  ASSIGN_OR_RETURN(std::optional<std::string> sep, OptionalStr(name, a[0]));
  if (sep && sep->empty()) return absl::InvalidArgumentError("empty separator");
  int64_t maxsplit = -1;
  if (a[1]) {
    if (!a[1]->is_integral()) return absl::InvalidArgumentError("maxsplit must be an integer");
    maxsplit = a[1]->AsInt();
  }
  RETURN_IF_ERROR(ctx.ChargeBytes(self.AsString().size()));
  std::vector<Value> parts;
  for (std::string& part : PySplit(self.AsString(), sep, maxsplit, from_right)) {
    ASSIGN_OR_RETURN(Value v, ctx.MakeString(std::move(part)));
    parts.push_back(std::move(v));
  }
  return ctx.MakeList(std::move(parts));
}

PAGELLM_METHOD(StrSplit) { return Split(ctx, self, args, false); }
PAGELLM_METHOD(StrRSplit) { return Split(ctx, self, args, true); }

PAGELLM_METHOD(StrReplace) {
  ASSIGN_OR_RETURN(auto a, BindArgs("replace", args, {"old", "new", "count"}, 2));
  ASSIGN_OR_RETURN(std::string old_text, RequiredStr("replace", *a[0]));
  ASSIGN_OR_RETURN(std::string new_text, RequiredStr("replace", *a[1]));
  const int64_t count = a[2] && a[2]->is_integral() ? a[2]->AsInt() : -1;
  const std::string& s = self.AsString();
  const uint64_t matches = old_text.empty() ? CodepointCount(s) + 1 : s.size() / old_text.size();
  RETURN_IF_ERROR(ctx.CheckStringSize(s.size() + matches * new_text.size()));
  return ctx.MakeString(PyReplace(s, old_text, new_text, count));
}

PAGELLM_METHOD(StrJoin) {
  ASSIGN_OR_RETURN(auto a, BindArgs("join", args, {"iterable"}, 1));
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, *a[0]));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence item ", i, ": expected str instance, ", items[i].TypeName(), " found"));
    }
    if (i > 0) out += self.AsString();
    out += items[i].AsString();
    RETURN_IF_ERROR(ctx.CheckStringSize(out.size()));
  }
  return ctx.MakeString(std::move(out));
}

PAGELLM_METHOD(StrCount) {
  ASSIGN_OR_RETURN(auto a, BindArgs("count", args, {"sub"}, 1));
  ASSIGN_OR_RETURN(std::string sub, RequiredStr("count", *a[0]));
  const std::string& s = self.AsString();
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  if (sub.empty()) return Value::Int(static_cast<int64_t>(CodepointCount(s)) + 1);
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) {
    ++n;
  }
  return Value::Int(n);
}

// str.find(sub) / rfind(sub): the code-point index of the first (last) match, or -1.
absl::StatusOr<Value> Find(RenderContext& ctx, const Value& self, const CallArgs& args,
                           bool from_right) {
  const std::string_view name = from_right ? "rfind" : "find";
  ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"sub"}, 1));
  ASSIGN_OR_RETURN(std::string sub, RequiredStr(name, *a[0]));
  const std::string& s = self.AsString();
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  const size_t pos = from_right ? s.rfind(sub) : s.find(sub);
  if (pos == std::string::npos) return Value::Int(-1);
  return Value::Int(static_cast<int64_t>(CodepointCount(std::string_view(s).substr(0, pos))));
}

PAGELLM_METHOD(StrFind) { return Find(ctx, self, args, false); }
PAGELLM_METHOD(StrRFind) { return Find(ctx, self, args, true); }

absl::StatusOr<Value> Classify(RenderContext& ctx, const Value& self, const CallArgs& args,
                               std::string_view name, bool (*pred)(uint32_t)) {
  RETURN_IF_ERROR(BindArgs(name, args, {}, 0).status());
  const std::string& s = self.AsString();
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  if (s.empty()) return Value::Bool(false);
  for (size_t pos = 0; pos < s.size();) {
    if (!pred(NextCodepoint(s, &pos))) return Value::Bool(false);
  }
  return Value::Bool(true);
}

PAGELLM_METHOD(StrIsSpace) { return Classify(ctx, self, args, "isspace", IsPySpace); }

// str.isalpha(), isdigit(), ...: every character in class `c` (and at least one character,
// except for isprintable and isascii).
absl::StatusOr<Value> ClassifyChars(RenderContext& ctx, const Value& self, const CallArgs& args,
                                    std::string_view name, CharClass c) {
  RETURN_IF_ERROR(BindArgs(name, args, {}, 0).status());
  const std::string& s = self.AsString();
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  if (s.empty()) return Value::Bool(c == CharClass::kPrintable);
  for (size_t pos = 0; pos < s.size();) {
    ASSIGN_OR_RETURN(bool in_class, PyCharIs(c, NextCodepoint(s, &pos)));
    if (!in_class) return Value::Bool(false);
  }
  return Value::Bool(true);
}

PAGELLM_METHOD(StrIsAlpha) { return ClassifyChars(ctx, self, args, "isalpha", CharClass::kAlpha); }
PAGELLM_METHOD(StrIsDigit) { return ClassifyChars(ctx, self, args, "isdigit", CharClass::kDigit); }
PAGELLM_METHOD(StrIsDecimal) {
  return ClassifyChars(ctx, self, args, "isdecimal", CharClass::kDecimal);
}
PAGELLM_METHOD(StrIsNumeric) {
  return ClassifyChars(ctx, self, args, "isnumeric", CharClass::kNumeric);
}
PAGELLM_METHOD(StrIsAlnum) { return ClassifyChars(ctx, self, args, "isalnum", CharClass::kAlnum); }
PAGELLM_METHOD(StrIsPrintable) {
  return ClassifyChars(ctx, self, args, "isprintable", CharClass::kPrintable);
}
PAGELLM_METHOD(StrIsAscii) {
  RETURN_IF_ERROR(BindArgs("isascii", args, {}, 0).status());
  for (char c : self.AsString()) {
    if (static_cast<unsigned char>(c) >= 0x80) return Value::Bool(false);
  }
  return Value::Bool(true);
}

// str.isidentifier(): a letter or _, then letters, digits and _ (ASCII only here: Python's
// XID classes are not known for other characters).
PAGELLM_METHOD(StrIsIdentifier) {
  RETURN_IF_ERROR(BindArgs("isidentifier", args, {}, 0).status());
  const std::string& s = self.AsString();
  if (s.empty()) return Value::Bool(false);
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = s[i];
    if (c >= 0x80) {
      return absl::InvalidArgumentError("isidentifier() of non-ASCII text is not supported");
    }
    if (!(std::isalpha(c) || c == '_' || (i > 0 && std::isdigit(c)))) return Value::Bool(false);
  }
  return Value::Bool(true);
}

// str.istitle(): upper case characters only after uncased ones, lower case only after cased
// ones, and at least one cased character.
PAGELLM_METHOD(StrIsTitle) {
  RETURN_IF_ERROR(BindArgs("istitle", args, {}, 0).status());
  const std::string& s = self.AsString();
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  bool cased = false;
  bool previous_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const size_t at = pos;
    NextCodepoint(s, &pos);
    const std::string_view c = std::string_view(s).substr(at, pos - at);
    if (PyIsUpper(c)) {
      if (previous_cased) return Value::Bool(false);
      previous_cased = cased = true;
    } else if (PyIsLower(c)) {
      if (!previous_cased) return Value::Bool(false);
      previous_cased = cased = true;
    } else {
      previous_cased = false;
    }
  }
  return Value::Bool(cased);
}

PAGELLM_METHOD(StrFormat) {
  RETURN_IF_ERROR(ctx.ChargeBytes(self.AsString().size()));
  ASSIGN_OR_RETURN(std::string out, PyStrFormat(self.AsString(), args.positional, args.keywords,
                                                ctx.limits().max_string_bytes));
  return ctx.MakeString(std::move(out));
}
PAGELLM_METHOD(StrIsLower) {
  RETURN_IF_ERROR(BindArgs("islower", args, {}, 0).status());
  RETURN_IF_ERROR(ctx.ChargeBytes(self.AsString().size()));
  return Value::Bool(PyIsLower(self.AsString()));
}
PAGELLM_METHOD(StrIsUpper) {
  RETURN_IF_ERROR(BindArgs("isupper", args, {}, 0).status());
  RETURN_IF_ERROR(ctx.ChargeBytes(self.AsString().size()));
  return Value::Bool(PyIsUpper(self.AsString()));
}

// str.ljust / rjust / center(width, fillchar=' ').
absl::StatusOr<Value> Pad(RenderContext& ctx, const Value& self, const CallArgs& args,
                          std::string_view name, PyAlign align) {
  ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"width", "fillchar"}, 1));
  if (!a[0]->is_integral()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", a[0]->TypeName(), "' object cannot be interpreted as an integer"));
  }
  std::string fill = " ";
  if (a[1]) {
    if (!a[1]->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(name), "() argument 2 must be str, not ", a[1]->TypeName()));
    }
    fill = a[1]->AsString();
    if (CodepointCount(fill) != 1) {
      return absl::InvalidArgumentError("The fill character must be exactly one character long");
    }
  }
  const std::string& s = self.AsString();
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  const int64_t width = a[0]->AsInt();
  const auto len = static_cast<int64_t>(CodepointCount(s));
  if (width <= len) return self;
  const auto margin = static_cast<uint64_t>(width - len);
  const uint64_t max = ctx.limits().max_string_bytes;
  RETURN_IF_ERROR(ctx.CheckStringSize(margin > max ? max + 1 : s.size() + margin * fill.size()));
  return ctx.MakeString(PyPad(s, static_cast<size_t>(width), fill, align));
}

PAGELLM_METHOD(StrLJust) { return Pad(ctx, self, args, "ljust", PyAlign::kLeft); }
PAGELLM_METHOD(StrRJust) { return Pad(ctx, self, args, "rjust", PyAlign::kRight); }
PAGELLM_METHOD(StrCenter) { return Pad(ctx, self, args, "center", PyAlign::kCenter); }

PAGELLM_METHOD(StrZFill) {
  ASSIGN_OR_RETURN(auto a, BindArgs("zfill", args, {"width"}, 1));
  if (!a[0]->is_integral()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", a[0]->TypeName(), "' object cannot be interpreted as an integer"));
  }
  const std::string& s = self.AsString();
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  const auto len = static_cast<int64_t>(CodepointCount(s));
  if (a[0]->AsInt() <= len) return self;
  const auto margin = static_cast<uint64_t>(a[0]->AsInt() - len);
  const uint64_t max = ctx.limits().max_string_bytes;
  RETURN_IF_ERROR(ctx.CheckStringSize(margin > max ? max + 1 : s.size() + margin));
  std::string out(margin, '0');
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {  // the sign goes first
    out[0] = s[0];
    out.push_back('0');
    out.append(s, 1);
  } else {
    out.append(s);
  }
  return ctx.MakeString(std::move(out));
}

absl::StatusOr<Value> RemoveAffix(RenderContext& ctx, const Value& self, const CallArgs& args,
                                  bool prefix) {
  const std::string_view name = prefix ? "removeprefix" : "removesuffix";
  ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"affix"}, 1));
  if (!a[0]->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(name), "() argument must be str, not ", a[0]->TypeName()));
  }
  const std::string& s = self.AsString();
  const std::string& affix = a[0]->AsString();
  if (prefix ? !absl::StartsWith(s, affix) : !absl::EndsWith(s, affix)) return self;
  return ctx.MakeString(prefix ? s.substr(affix.size()) : s.substr(0, s.size() - affix.size()));
}

PAGELLM_METHOD(StrRemovePrefix) { return RemoveAffix(ctx, self, args, true); }
PAGELLM_METHOD(StrRemoveSuffix) { return RemoveAffix(ctx, self, args, false); }

absl::StatusOr<Value> Partition(RenderContext& ctx, const Value& self, const CallArgs& args,
                                bool from_right) {
  const std::string_view name = from_right ? "rpartition" : "partition";
  ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"sep"}, 1));
  ASSIGN_OR_RETURN(std::string sep, RequiredStr(name, *a[0]));
  if (sep.empty()) return absl::InvalidArgumentError("empty separator");
  const std::string& s = self.AsString();
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  const size_t at = from_right ? s.rfind(sep) : s.find(sep);
  std::vector<Value> parts;
  if (at == std::string::npos) {
    parts = {from_right ? Value::String("") : self, Value::String(""),
             from_right ? self : Value::String("")};
  } else {
    ASSIGN_OR_RETURN(Value head, ctx.MakeString(s.substr(0, at)));
    ASSIGN_OR_RETURN(Value tail, ctx.MakeString(s.substr(at + sep.size())));
    parts = {head, *a[0], tail};
  }
  return ctx.MakeList(std::move(parts), SeqKind::kTuple);
}

PAGELLM_METHOD(StrPartition) { return Partition(ctx, self, args, false); }
PAGELLM_METHOD(StrRPartition) { return Partition(ctx, self, args, true); }

PAGELLM_METHOD(StrSplitLines) {
  ASSIGN_OR_RETURN(auto a, BindArgs("splitlines", args, {"keepends"}, 0));
  const std::string& s = self.AsString();
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  std::vector<Value> lines;
  for (std::string_view line : PySplitLines(s, a[0] && a[0]->Truthy())) {
    ASSIGN_OR_RETURN(Value v, ctx.MakeString(std::string(line)));
    lines.push_back(std::move(v));
  }
  return ctx.MakeList(std::move(lines));
}

PAGELLM_METHOD(StrSwapCase) {
  RETURN_IF_ERROR(BindArgs("swapcase", args, {}, 0).status());
  RETURN_IF_ERROR(ctx.ChargeBytes(self.AsString().size()));
  RETURN_IF_ERROR(ctx.CheckStringSize(self.AsString().size() * 3));  // at most 3x (U+0390)
  return ctx.MakeString(PySwapCase(self.AsString()));
}

PAGELLM_METHOD(StrExpandTabs) {
  ASSIGN_OR_RETURN(auto a, BindArgs("expandtabs", args, {"tabsize"}, 0));
  if (a[0] && !a[0]->is_integral()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", a[0]->TypeName(), "' object cannot be interpreted as an integer"));
  }
  const int64_t tabsize = a[0] ? a[0]->AsInt() : 8;
  const std::string& s = self.AsString();
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  const uint64_t tabs = std::count(s.begin(), s.end(), '\t');
  const uint64_t max = ctx.limits().max_string_bytes;
  if (tabsize > 0) {
    RETURN_IF_ERROR(ctx.CheckStringSize(
        static_cast<uint64_t>(tabsize) > max ? max + 1 : s.size() + tabs * tabsize));
  }
  std::string out;
  int64_t column = 0;
  for (size_t pos = 0; pos < s.size();) {
    const size_t at = pos;
    const uint32_t cp = NextCodepoint(s, &pos);
    if (cp == '\t') {
      if (tabsize > 0) {
        const int64_t n = tabsize - column % tabsize;
        out.append(static_cast<size_t>(n), ' ');
        column += n;
      }
    } else {
      out.append(s, at, pos - at);
      column = cp == '\n' || cp == '\r' ? 0 : column + 1;
    }
  }
  return ctx.MakeString(std::move(out));
}

// list.count(x) / list.index(x), and tuple's.
absl::StatusOr<Value> ListSearch(RenderContext& ctx, const Value& self, const CallArgs& args,
                                 bool index) {
  const std::string_view name = index ? "index" : "count";
  const ListObject& list = *self.AsList();
  if (list.seq != SeqKind::kList && list.seq != SeqKind::kTuple) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", self.TypeName(), "' object has no attribute '", std::string(name), "'"));
  }
  ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"value"}, 1));
  RETURN_IF_ERROR(ctx.ChargeSteps(list.items.size()));
  int64_t n = 0;
  for (size_t i = 0; i < list.items.size(); ++i) {
    ASSIGN_OR_RETURN(bool equal, PyEquals(list.items[i], *a[0], ctx));
    if (!equal) continue;
    if (index) return Value::Int(static_cast<int64_t>(i));
    ++n;
  }
  if (!index) return Value::Int(n);
  return absl::InvalidArgumentError(list.seq == SeqKind::kTuple ? "tuple.index(x): x not in tuple"
                                                                : "list.index(x): x not in list");
}

PAGELLM_METHOD(ListCount) { return ListSearch(ctx, self, args, false); }
PAGELLM_METHOD(ListIndex) { return ListSearch(ctx, self, args, true); }

// dict.items() / keys() / values(): views (sized, re-iterable, not indexable).
absl::StatusOr<Value> DictView(RenderContext& ctx, const Value& self, const CallArgs& args,
                               std::string_view name) {
  RETURN_IF_ERROR(BindArgs(name, args, {}, 0).status());
  std::vector<Value> out;
  for (const auto& [key, value] : self.AsDict()->entries) {
    if (name == "keys") {
      out.push_back(key);
    } else if (name == "values") {
      out.push_back(value);
    } else {
      ASSIGN_OR_RETURN(Value pair, ctx.MakeList({key, value}, SeqKind::kTuple));
      out.push_back(pair);
    }
  }
  return ctx.MakeList(std::move(out), SeqKind::kView,
                      name == "keys"     ? "dict_keys"
                      : name == "values" ? "dict_values"
                                         : "dict_items");
}

PAGELLM_METHOD(DictItems) { return DictView(ctx, self, args, "items"); }
PAGELLM_METHOD(DictKeys) { return DictView(ctx, self, args, "keys"); }
PAGELLM_METHOD(DictValues) { return DictView(ctx, self, args, "values"); }

PAGELLM_METHOD(DictGet) {
  ASSIGN_OR_RETURN(auto a, BindArgs("get", args, {"key", "default"}, 1));
  if (a[0]->is_undefined() || (!a[0]->is_number() && !a[0]->is_string() && !a[0]->is_none())) {
    return absl::InvalidArgumentError(absl::StrCat("unhashable type: '", a[0]->TypeName(), "'"));
  }
  const Value* v = self.AsDict()->Find(*a[0]);
  if (v != nullptr) return *v;
  return a[1] ? *a[1] : Value::None();
}

PAGELLM_METHOD(LoopCycle) {
  if (!args.keywords.empty()) return absl::InvalidArgumentError("cycle() takes no keywords");
  if (args.positional.empty()) return absl::InvalidArgumentError("no items for cycling given");
  const int64_t n = static_cast<int64_t>(args.positional.size());
  return args.positional[self.AsLoop()->index0 % n];
}

// loop.changed(*values): true unless called last with equal values.
PAGELLM_METHOD(LoopChanged) {
  if (!args.keywords.empty()) return absl::InvalidArgumentError("changed() takes no keywords");
  ASSIGN_OR_RETURN(Value values, ctx.MakeList(args.positional, SeqKind::kTuple));
  LoopObject& loop = *self.AsLoop();
  if (loop.last_changed) {
    ASSIGN_OR_RETURN(bool same, PyEquals(*loop.last_changed, values, ctx));
    if (same) return Value::Bool(false);
  }
  loop.last_changed = values;
  return Value::Bool(true);
}

PAGELLM_METHOD(CyclerNext) {
  RETURN_IF_ERROR(BindArgs("next", args, {}, 0).status());
  CallableObject& cycler = *self.AsCallable();
  Value current = cycler.items[cycler.position];
  cycler.position = (cycler.position + 1) % cycler.items.size();
  return current;
}

PAGELLM_METHOD(CyclerReset) {
  RETURN_IF_ERROR(BindArgs("reset", args, {}, 0).status());
  self.AsCallable()->position = 0;
  return Value::None();
}

#undef PAGELLM_METHOD

struct NamedMethod {
  ValueKind kind;
  std::string_view name;
  MethodFn fn;
};

constexpr NamedMethod kMethods[] = {
    {ValueKind::kString, "strip", StrStrip},
    {ValueKind::kString, "lstrip", StrLStrip},
    {ValueKind::kString, "rstrip", StrRStrip},
    {ValueKind::kString, "startswith", StrStartsWith},
    {ValueKind::kString, "endswith", StrEndsWith},
    {ValueKind::kString, "upper", StrUpper},
    {ValueKind::kString, "lower", StrLower},
    {ValueKind::kString, "title", StrTitle},
    {ValueKind::kString, "capitalize", StrCapitalize},
    {ValueKind::kString, "split", StrSplit},
    {ValueKind::kString, "rsplit", StrRSplit},
    {ValueKind::kString, "replace", StrReplace},
    {ValueKind::kString, "join", StrJoin},
    {ValueKind::kString, "count", StrCount},
    {ValueKind::kString, "find", StrFind},
    {ValueKind::kString, "isdigit", StrIsDigit},
    {ValueKind::kString, "isalpha", StrIsAlpha},
    {ValueKind::kString, "isdecimal", StrIsDecimal},
    {ValueKind::kString, "isnumeric", StrIsNumeric},
    {ValueKind::kString, "isalnum", StrIsAlnum},
    {ValueKind::kString, "isprintable", StrIsPrintable},
    {ValueKind::kString, "isascii", StrIsAscii},
    {ValueKind::kString, "isidentifier", StrIsIdentifier},
    {ValueKind::kString, "istitle", StrIsTitle},
    {ValueKind::kString, "format", StrFormat},
    {ValueKind::kString, "isspace", StrIsSpace},
    {ValueKind::kString, "islower", StrIsLower},
    {ValueKind::kString, "isupper", StrIsUpper},
    {ValueKind::kString, "ljust", StrLJust},
    {ValueKind::kString, "rjust", StrRJust},
    {ValueKind::kString, "center", StrCenter},
    {ValueKind::kString, "zfill", StrZFill},
    {ValueKind::kString, "removeprefix", StrRemovePrefix},
    {ValueKind::kString, "removesuffix", StrRemoveSuffix},
    {ValueKind::kString, "partition", StrPartition},
    {ValueKind::kString, "rpartition", StrRPartition},
    {ValueKind::kString, "rfind", StrRFind},
    {ValueKind::kString, "splitlines", StrSplitLines},
    {ValueKind::kString, "swapcase", StrSwapCase},
    {ValueKind::kString, "expandtabs", StrExpandTabs},
    {ValueKind::kList, "count", ListCount},
    {ValueKind::kList, "index", ListIndex},
    {ValueKind::kDict, "items", DictItems},
    {ValueKind::kDict, "keys", DictKeys},
    {ValueKind::kDict, "values", DictValues},
    {ValueKind::kDict, "get", DictGet},
    {ValueKind::kLoop, "cycle", LoopCycle},
    {ValueKind::kLoop, "changed", LoopChanged},
    {ValueKind::kCallable, "next", CyclerNext},
    {ValueKind::kCallable, "reset", CyclerReset},
};

}  // namespace

MethodFn FindMethod(const Value& self, std::string_view name) {
  if (self.kind() == ValueKind::kCallable && self.AsCallable()->kind != CallableKind::kCycler) {
    return nullptr;  // only cyclers have methods
  }
  for (const NamedMethod& m : kMethods) {
    if (m.kind == self.kind() && m.name == name) return m.fn;
  }
  return nullptr;
}

}  // namespace pagellm::chat_template
