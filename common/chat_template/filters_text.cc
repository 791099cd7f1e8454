// Jinja2's text-producing filters (jinja2/filters.py) that are rarer in chat templates:
// wordcount, format, striptags, urlencode, filesizeformat, xmlattr, forceescape, pprint.
// Where Python consults tables this interpreter does not carry (the Unicode database for \w,
// the 2231 HTML entities of html.unescape, pprint's line wrapping) the filters fail with
// InvalidArgument for the inputs that would need them instead of rendering differently.
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/chat_template/access.h"
#include "common/chat_template/builtins.h"
#include "common/chat_template/filter_helpers.h"
#include "common/chat_template/operators.h"
#include "common/chat_template/py_chartype.h"
#include "common/chat_template/py_format.h"
#include "common/chat_template/py_format_string.h"
#include "common/chat_template/py_string.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pagellm::chat_template {
namespace {

#define PAGELLM_FILTER(fn_name)                                                      \
  absl::StatusOr<Value> fn_name([[maybe_unused]] RenderContext& ctx, const Value& v, \
                                [[maybe_unused]] const CallArgs& args)

// len(re.findall(r"\w+", str(v))).
PAGELLM_FILTER(WordCount) {
  RETURN_IF_ERROR(NoArgs("wordcount", args));
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  int64_t words = 0;
  bool in_word = false;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t cp = NextCodepoint(s, &pos);
    ASSIGN_OR_RETURN(bool word, PyCharIs(CharClass::kWord, cp));
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value::Int(words);
}

// str(v) % (kwargs or args).
PAGELLM_FILTER(Format) {
  if (!args.positional.empty() && !args.keywords.empty()) {
    return absl::InvalidArgumentError(
        "can't handle positional and keyword arguments at the same time");
  }
  ASSIGN_OR_RETURN(std::string fmt, ToStr(ctx, v));
  RETURN_IF_ERROR(ctx.ChargeBytes(fmt.size()));
  Value operand;
  if (!args.keywords.empty()) {
    operand = ctx.MakeDict();
    RETURN_IF_ERROR(ctx.ChargeSteps(args.keywords.size()));
    for (const auto& [key, value] : args.keywords) {
      operand.AsDict()->Set(Value::String(key), value);
    }
  } else {
    ASSIGN_OR_RETURN(operand, ctx.MakeList(args.positional, SeqKind::kTuple));
  }
  ASSIGN_OR_RETURN(std::string out, PyPercentFormat(fmt, operand, ctx.limits().max_string_bytes));
  return ctx.MakeString(std::move(out));
}

// html.unescape for the entities this interpreter knows; nullopt for any other `&name`.
std::optional<std::string> Unescape(std::string_view s) {
  std::string out;
  for (size_t pos = 0; pos < s.size();) {
    if (s[pos] != '&') {
      out += s[pos++];
      continue;
    }
    size_t end = pos + 1;
    if (end < s.size() && s[end] == '#') {
      ++end;
      const bool hex = end < s.size() && (s[end] == 'x' || s[end] == 'X');
      if (hex) ++end;
      const size_t digits = end;
      uint32_t cp = 0;
      while (end < s.size() && (hex ? std::isxdigit(static_cast<unsigned char>(s[end]))
                                    : std::isdigit(static_cast<unsigned char>(s[end])))) {
        cp = cp * (hex ? 16 : 10) + (std::isdigit(static_cast<unsigned char>(s[end]))
                                         ? s[end] - '0'
                                         : (s[end] | 0x20) - 'a' + 10);
        if (cp > 0x10FFFF) return std::nullopt;
        ++end;
      }
      if (end == digits) {  // "&#" without digits stays as it is
        out.append(s.substr(pos, end - pos));
        pos = end;
        continue;
      }
      if (end < s.size() && s[end] == ';') ++end;
      // Plain characters only: Python maps or drops the control and invalid ones.
      const bool plain = cp == '\t' || cp == '\n' || (cp >= 0x20 && cp < 0x7F) ||
                         (cp >= 0xA0 && cp < 0xD800) || (cp >= 0xE000 && cp < 0xFDD0) ||
                         (cp > 0xFDEF && cp < 0xFFFE) || (cp >= 0x10000 && (cp & 0xFFFE) != 0xFFFE);
      if (!plain) return std::nullopt;
      AppendCodepoint(cp, &out);
      pos = end;
      continue;
    }
    // A name: html.unescape matches [^\t\n\f <&#;]{1,32};?
    while (end < s.size() && end - pos <= 32 &&
           std::string_view("\t\n\f <&#;").find(s[end]) == std::string_view::npos) {
      ++end;
    }
    if (end == pos + 1) {
      out += '&';
      ++pos;
      continue;
    }
    const std::string_view name = s.substr(pos + 1, end - pos - 1);
    if (end >= s.size() || s[end] != ';') return std::nullopt;
    constexpr std::pair<std::string_view, std::string_view> kEntities[] = {
        {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}, {"nbsp", "\u00a0"}};
    bool known = false;
    for (const auto& [entity, text] : kEntities) {
      if (name == entity) {
        out.append(text);
        known = true;
      }
    }
    if (!known) return std::nullopt;
    pos = end + 1;
  }
  return out;
}

// markupsafe's Markup.striptags: drops <!-- comments --> and <tags>, collapses whitespace,
// then unescapes entities.
PAGELLM_FILTER(StripTags) {
  RETURN_IF_ERROR(NoArgs("striptags", args));
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  RETURN_IF_ERROR(ctx.ChargeBytes(s.size()));
  std::string kept;
  size_t pos = 0;
  for (size_t start; (start = s.find('<', pos)) != std::string::npos;) {
    size_t end;
    if (s.compare(start, 4, "<!--") == 0) {
      end = s.find("-->", start + 4);
      if (end == std::string::npos) break;
      end += 3;
    } else {
      end = s.find('>', start);
      if (end == std::string::npos) break;
      end += 1;
    }
    kept.append(s, pos, start - pos);
    pos = end;
  }
  kept.append(s, pos);
  std::string collapsed;
  for (const std::string& word : PySplit(kept, std::nullopt, -1, false)) {
    if (!collapsed.empty()) collapsed += ' ';
    collapsed += word;
  }
  std::optional<std::string> text = Unescape(collapsed);
  if (!text) {
    return absl::InvalidArgumentError(
        "striptags: this interpreter unescapes only &amp; &lt; &gt; &quot; &apos; &nbsp; and "
        "plain numeric character references");
  }
  return ctx.MakeString(std::move(*text));
}

// urllib.parse.quote: everything but letters, digits, _.-~ (and / unless `for_qs`) as %XX;
// with `for_qs` spaces become +.
std::string UrlQuote(std::string_view s, bool for_qs) {
  constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (c == '/' && !for_qs)) {
      out += static_cast<char>(c);
    } else if (c == ' ' && for_qs) {
      out += '+';
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

PAGELLM_FILTER(UrlEncode) {
  RETURN_IF_ERROR(NoArgs("urlencode", args));
  const size_t max = ctx.limits().max_string_bytes;
  if (v.is_string() || v.is_number() || v.is_none()) {
    ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
    RETURN_IF_ERROR(ctx.CheckStringSize(s.size() * 3));
    return ctx.MakeString(UrlQuote(s, false));
  }
  std::vector<Value> pairs;
  if (v.kind() == ValueKind::kDict) {
    RETURN_IF_ERROR(ctx.ChargeSteps(v.AsDict()->entries.size()));
    for (const auto& [key, value] : v.AsDict()->entries) {
      ASSIGN_OR_RETURN(Value pair, ctx.MakeList({key, value}, SeqKind::kTuple));
      pairs.push_back(pair);
    }
  } else {
    ASSIGN_OR_RETURN(pairs, Iterate(ctx, v));
  }
  std::string out;
  for (const Value& pair : pairs) {
    ASSIGN_OR_RETURN(std::vector<Value> kv, Iterate(ctx, pair));
    if (kv.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(kv.size() > 2 ? "too many" : "not enough",
                                                     " values to unpack (expected 2, got ",
                                                     kv.size(), ")"));
    }
    ASSIGN_OR_RETURN(std::string key, ToStr(ctx, kv[0]));
    ASSIGN_OR_RETURN(std::string value, ToStr(ctx, kv[1]));
    if (!out.empty()) out += '&';
    absl::StrAppend(&out, UrlQuote(key, true), "=", UrlQuote(value, true));
    if (out.size() > max) return ctx.CheckStringSize(out.size());
  }
  return ctx.MakeString(std::move(out));
}

PAGELLM_FILTER(FileSizeFormat) {
  ASSIGN_OR_RETURN(auto a, BindArgs("filesizeformat", args, {"binary"}, 0));
  const bool binary = a[0] && a[0]->Truthy();
  double bytes;
  if (v.is_number()) {
    bytes = v.AsDouble();
  } else if (v.is_string()) {
    std::optional<double> d = ParseFloat(v.AsString());
    if (!d) {
      return absl::InvalidArgumentError(
          absl::StrCat("could not convert string to float: ", PyStringRepr(v.AsString())));
    }
    bytes = *d;
  } else if (v.is_undefined()) {
    return UndefinedError(v);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "float() argument must be a string or a real number, not '", v.TypeName(), "'"));
  }
  const double base = binary ? 1024 : 1000;
  if (bytes == 1) return Value::String("1 Byte");
  if (bytes < base) {
    if (!(bytes > -9.2e18)) return absl::InvalidArgumentError("cannot convert float to integer");
    return ctx.MakeString(absl::StrCat(static_cast<int64_t>(bytes), " Bytes"));
  }
  static constexpr const char* kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static constexpr const char* kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  static constexpr double kDecimalUnits[] = {1e6, 1e9, 1e12, 1e15, 1e18, 1e21, 1e24, 1e27};
  size_t i = 0;
  while (i + 1 < 8 &&
         !(bytes < (binary ? std::ldexp(1.0, 10 * static_cast<int>(i + 2)) : kDecimalUnits[i]))) {
    ++i;
  }
  const double unit = binary ? std::ldexp(1.0, 10 * static_cast<int>(i + 2)) : kDecimalUnits[i];
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%.1f %s", base * bytes / unit,
                binary ? kBinary[i] : kDecimal[i]);
  return ctx.MakeString(buf);
}

PAGELLM_FILTER(XmlAttr) {
  ASSIGN_OR_RETURN(auto a, BindArgs("xmlattr", args, {"autospace"}, 0));
  const bool autospace = !a[0] || a[0]->Truthy();
  if (v.is_undefined()) return UndefinedError(v);
  if (v.kind() != ValueKind::kDict) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", v.TypeName(), "' object has no attribute 'items'"));
  }
  std::string out;
  for (const auto& [key, value] : v.AsDict()->entries) {
    if (value.is_none() || value.is_undefined()) continue;
    if (!key.is_string()) {
      return absl::InvalidArgumentError("expected string or bytes-like object");
    }
    for (char c : key.AsString()) {
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '/' ||
          c == '>' || c == '=') {
        return absl::InvalidArgumentError(
            absl::StrCat("Invalid character in attribute name: ", PyStringRepr(key.AsString())));
      }
    }
    ASSIGN_OR_RETURN(std::string text, ToStr(ctx, value));
    if (!out.empty()) out += ' ';
    absl::StrAppend(&out, HtmlEscape(key.AsString()), "=\"", HtmlEscape(text), "\"");
    RETURN_IF_ERROR(ctx.CheckStringSize(out.size()));
  }
  // Built by append: GCC 12 warns (-Wrestrict, falsely) on out.insert(0, " ").
  std::string result;
  if (autospace && !out.empty()) result.push_back(' ');
  result.append(out);
  return ctx.MakeString(std::move(result));
}

PAGELLM_FILTER(ForceEscape) {
  RETURN_IF_ERROR(NoArgs("forceescape", args));
  ASSIGN_OR_RETURN(std::string s, ToStr(ctx, v));
  return ctx.MakeString(HtmlEscape(s));
}

// A copy of `v` whose dicts have their keys sorted, as pprint prints them.
absl::StatusOr<Value> SortDicts(RenderContext& ctx, const Value& v, int depth) {
  if (depth > kMaxFormatDepth) {
    return absl::InvalidArgumentError("values nested too deeply (or circular) to print");
  }
  if (v.is_sequence()) {
    std::vector<Value> items;
    for (const Value& item : v.AsList()->items) {
      ASSIGN_OR_RETURN(Value x, SortDicts(ctx, item, depth + 1));
      items.push_back(std::move(x));
    }
    return ctx.MakeList(std::move(items), v.AsList()->seq);
  }
  if (v.kind() != ValueKind::kDict) return v;
  std::vector<std::pair<Value, Value>> entries = v.AsDict()->entries;
  RETURN_IF_ERROR(ctx.ChargeSteps(entries.size()));
  for (size_t i = 1; i < entries.size(); ++i) {  // mixed key types sort by type name in Python
    const Value& x = entries[0].first;
    const Value& y = entries[i].first;
    if (x.is_string() != y.is_string() || x.is_number() != y.is_number()) {
      return absl::InvalidArgumentError("pprint of a dict with mixed key types is not supported");
    }
  }
  absl::Status error;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    if (!error.ok()) return false;
    absl::StatusOr<bool> less = PyLess(x.first, y.first, ctx);
    if (!less.ok()) error = less.status();
    return less.ok() && *less;
  });
  RETURN_IF_ERROR(error);
  Value out = ctx.MakeDict();
  for (auto& [key, value] : entries) {
    ASSIGN_OR_RETURN(Value x, SortDicts(ctx, value, depth + 1));
    out.AsDict()->Set(key, std::move(x));
  }
  return out;
}

// pprint.pformat(v): repr() with sorted dict keys, when it fits pprint's 80 columns.
PAGELLM_FILTER(PPrint) {
  RETURN_IF_ERROR(NoArgs("pprint", args));
  ASSIGN_OR_RETURN(Value sorted, SortDicts(ctx, v, 0));
  std::string out;
  RETURN_IF_ERROR(AppendPyRepr(sorted, ctx.limits().max_string_bytes, &out));
  if (CodepointCount(out) > 80) {
    return absl::InvalidArgumentError(
        "pprint of a value longer than 80 characters (which pprint wraps) is not supported");
  }
  return ctx.MakeString(std::move(out));
}

#undef PAGELLM_FILTER

struct NamedFilter {
  std::string_view name;
  FilterFn fn;
};

constexpr NamedFilter kFilters[] = {
    {"filesizeformat", FileSizeFormat},
    {"forceescape", ForceEscape},
    {"format", Format},
    {"pprint", PPrint},
    {"striptags", StripTags},
    {"urlencode", UrlEncode},
    {"wordcount", WordCount},
    {"xmlattr", XmlAttr},
};

}  // namespace

FilterFn FindTextFilter(std::string_view name) {
  for (const NamedFilter& f : kFilters) {
    if (f.name == name) return f.fn;
  }
  return nullptr;
}

}  // namespace pagellm::chat_template
