// Formatting follows CPython 3: float_repr_style "short" (shortest round-trip digits, exponent
// form when the decimal point is more than 16 places right or 4 places left of the first digit),
// unicode_repr (quote choice and escapes), and json.encoder (py_encode_basestring{,_ascii}).
#include "common/chat_template/py_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/chat_template/py_string.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {
namespace {

absl::Status TooLarge(size_t max_bytes) {
  return absl::InvalidArgumentError(
      absl::StrCat("formatted text would exceed the limit of ", max_bytes, " bytes"));
}

absl::Status TooDeep() {
  return absl::InvalidArgumentError("value nested too deeply (or circular) to format");
}

// Characters repr() escapes beyond ASCII controls: C1 controls, Unicode separators (Zs, Zl,
// Zp, other than the space), the common format characters (Cf), private use, noncharacters.
bool IsNonPrintable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return true;
  if (cp < 0x80) return false;
  return (cp >= 0x80 && cp <= 0xA0) || cp == 0xAD || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
         (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF ||
         (cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFFFE || cp == 0xFFFF ||
         (cp >= 0xE0000 && cp <= 0xE0FFF) || cp >= 0xF0000;
}

void AppendHex(uint32_t v, int digits, std::string* out) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%0*x", digits, v);
  out->append(buf);
}

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t cp = NextCodepoint(s, &pos);
    switch (cp) {
      case '"':
        out->append("\\\"");
        continue;
      case '\\':
        out->append("\\\\");
        continue;
      case '\n':
        out->append("\\n");
        continue;
      case '\r':
        out->append("\\r");
        continue;
      case '\t':
        out->append("\\t");
        continue;
      case '\b':
        out->append("\\b");
        continue;
      case '\f':
        out->append("\\f");
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        out->append("\\u");
        AppendHex(0xD800 | (v >> 10), 4, out);
        out->append("\\u");
        AppendHex(0xDC00 | (v & 0x3FF), 4, out);
      } else {
        out->append("\\u");
        AppendHex(cp, 4, out);
      }
      continue;
    }
    out->append(s.substr(start, pos - start));
  }
  out->push_back('"');
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return FormatPyFloat(d);
}

class Formatter {
 public:
  Formatter(size_t max_bytes, std::string* out) : max_bytes_(max_bytes), out_(out) {}

  absl::Status Str(const Value& v) {
    if (v.is_undefined()) return absl::OkStatus();
    if (v.is_string()) return Append(v.AsString());
    return Repr(v, 0);
  }

  absl::Status Repr(const Value& v, int depth) {
    if (depth > kMaxFormatDepth) return TooDeep();
    switch (v.kind()) {
      case ValueKind::kUndefined:
        return Append("Undefined");
      case ValueKind::kNone:
        return Append("None");
      case ValueKind::kBool:
        return Append(v.AsBool() ? "True" : "False");
      case ValueKind::kInt:
        return Append(absl::StrCat(v.AsInt()));
      case ValueKind::kFloat:
        return Append(FormatPyFloat(v.AsDouble()));
      case ValueKind::kString:
        if (v.AsString().size() > max_bytes_) return TooLarge(max_bytes_);
        return Append(PyStringRepr(v.AsString()));
      case ValueKind::kList: {
        const ListObject& list = *v.AsList();
        if (list.seq == SeqKind::kIterator) {
          return Append(absl::StrCat("<", list.type_name, " object>"));  // CPython adds an address
        }
        const bool tuple = list.seq == SeqKind::kTuple;
        if (list.seq == SeqKind::kView) RETURN_IF_ERROR(Append(absl::StrCat(list.type_name, "(")));
        RETURN_IF_ERROR(Append(tuple ? "(" : "["));
        for (size_t i = 0; i < list.items.size(); ++i) {
          if (i > 0) RETURN_IF_ERROR(Append(", "));
          RETURN_IF_ERROR(Repr(list.items[i], depth + 1));
        }
        if (tuple && list.items.size() == 1) RETURN_IF_ERROR(Append(","));
        RETURN_IF_ERROR(Append(tuple ? ")" : "]"));
        return list.seq == SeqKind::kView ? Append(")") : absl::OkStatus();
      }
      case ValueKind::kDict:
        return DictRepr(*v.AsDict(), depth);
      case ValueKind::kNamespace:
        RETURN_IF_ERROR(Append("<Namespace "));
        RETURN_IF_ERROR(DictRepr(*v.AsDict(), depth));
        return Append(">");
      case ValueKind::kLoop: {
        const LoopObject& loop = *v.AsLoop();
        return Append(
            absl::StrCat("<LoopContext ", loop.index0 + 1, "/", loop.items->items.size(), ">"));
      }
      case ValueKind::kCallable: {
        const CallableObject& fn = *v.AsCallable();
        switch (fn.kind) {
          case CallableKind::kMacro:  // Jinja2's Macro.__repr__
            return Append(absl::StrCat("<Macro ", PyStringRepr(fn.name), ">"));
          case CallableKind::kJoiner:  // CPython adds an address
            return Append("<jinja2.utils.Joiner object>");
          case CallableKind::kCycler:
            return Append("<jinja2.utils.Cycler object>");
          case CallableKind::kBuiltin:
            break;
        }
        return Append(absl::StrCat("<built-in method ", fn.name, ">"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Json(const Value& v, const JsonOptions& options, int depth) {
    if (depth > kMaxFormatDepth) return TooDeep();
    switch (v.kind()) {
      case ValueKind::kNone:
        return Append("null");
      case ValueKind::kBool:
        return Append(v.AsBool() ? "true" : "false");
      case ValueKind::kInt:
        return Append(absl::StrCat(v.AsInt()));
      case ValueKind::kFloat:
        return Append(JsonFloat(v.AsDouble()));
      case ValueKind::kString: {
        if (v.AsString().size() > max_bytes_) return TooLarge(max_bytes_);
        std::string s;
        AppendJsonString(v.AsString(), options.ensure_ascii, &s);
        return Append(s);
      }
      case ValueKind::kList: {
        if (!v.is_sequence()) {
          return absl::InvalidArgumentError(
              absl::StrCat("Object of type ", v.TypeName(), " is not JSON serializable"));
        }
        const std::vector<Value>& items = v.AsList()->items;
        if (items.empty()) return Append("[]");
        RETURN_IF_ERROR(Append("["));
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) RETURN_IF_ERROR(Append(options.item_separator));
          RETURN_IF_ERROR(Newline(options, depth + 1));
          RETURN_IF_ERROR(Json(items[i], options, depth + 1));
        }
        RETURN_IF_ERROR(Newline(options, depth));
        return Append("]");
      }
      case ValueKind::kDict:
        return JsonObject(*v.AsDict(), options, depth);
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("Object of type ", v.TypeName(), " is not JSON serializable"));
    }
  }

 private:
  absl::Status Append(std::string_view s) {
    if (out_->size() + s.size() > max_bytes_) return TooLarge(max_bytes_);
    out_->append(s);
    return absl::OkStatus();
  }

  absl::Status DictRepr(const DictObject& dict, int depth) {
    RETURN_IF_ERROR(Append("{"));
    for (size_t i = 0; i < dict.entries.size(); ++i) {
      if (i > 0) RETURN_IF_ERROR(Append(", "));
      RETURN_IF_ERROR(Repr(dict.entries[i].first, depth + 1));
      RETURN_IF_ERROR(Append(": "));
      RETURN_IF_ERROR(Repr(dict.entries[i].second, depth + 1));
    }
    return Append("}");
  }

  absl::Status Newline(const JsonOptions& options, int depth) {
    if (!options.indent) return absl::OkStatus();
    RETURN_IF_ERROR(Append("\n"));
    for (int i = 0; i < depth; ++i) RETURN_IF_ERROR(Append(*options.indent));
    return absl::OkStatus();
  }

  static absl::StatusOr<std::string> JsonKey(const Value& key) {
    switch (key.kind()) {
      case ValueKind::kString:
        return key.AsString();
      case ValueKind::kInt:
        return absl::StrCat(key.AsInt());
      case ValueKind::kFloat:
        return JsonFloat(key.AsDouble());
      case ValueKind::kBool:
        return std::string(key.AsBool() ? "true" : "false");
      case ValueKind::kNone:
        return std::string("null");
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("keys must be str, int, float, bool or None, not ", key.TypeName()));
    }
  }

  absl::Status JsonObject(const DictObject& dict, const JsonOptions& options, int depth) {
    if (dict.entries.empty()) return Append("{}");
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : dict.entries) entries.push_back(&e);
    if (options.sort_keys) {
      const bool all_strings =
          std::all_of(entries.begin(), entries.end(), [](auto* e) { return e->first.is_string(); });
      const bool all_numbers =
          std::all_of(entries.begin(), entries.end(), [](auto* e) { return e->first.is_number(); });
      if (!all_strings && !all_numbers) {
        return absl::InvalidArgumentError("'<' not supported between dict keys of mixed types");
      }
      std::stable_sort(entries.begin(), entries.end(), [&](auto* a, auto* b) {
        return all_strings ? a->first.AsString() < b->first.AsString()
                           : a->first.AsDouble() < b->first.AsDouble();
      });
    }
    RETURN_IF_ERROR(Append("{"));
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) RETURN_IF_ERROR(Append(options.item_separator));
      RETURN_IF_ERROR(Newline(options, depth + 1));
      absl::StatusOr<std::string> key = JsonKey(entries[i]->first);
      if (!key.ok()) return key.status();
      std::string quoted;
      AppendJsonString(*key, options.ensure_ascii, &quoted);
      RETURN_IF_ERROR(Append(quoted));
      RETURN_IF_ERROR(Append(options.key_separator));
      RETURN_IF_ERROR(Json(entries[i]->second, options, depth + 1));
    }
    RETURN_IF_ERROR(Newline(options, depth));
    return Append("}");
  }

  size_t max_bytes_;
  std::string* out_;
};

}  // namespace

std::string FormatPyFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, result.ptr - buf);  // [-]D[.DDD]e(+|-)XX
  std::string out;
  if (sci.front() == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
  const int decpt = exponent + 1;  // value = 0.DIGITS * 10^decpt
  const int ndigits = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out.push_back(digits[0]);
    if (ndigits > 1) absl::StrAppend(&out, ".", digits.substr(1));
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+',
                  exponent < 0 ? -exponent : exponent);
    out.append(exp_buf);
  } else if (decpt <= 0) {
    absl::StrAppend(&out, "0.", std::string(-decpt, '0'), digits);
  } else if (decpt >= ndigits) {
    absl::StrAppend(&out, digits, std::string(decpt - ndigits, '0'), ".0");
  } else {
    absl::StrAppend(&out, digits.substr(0, decpt), ".", digits.substr(decpt));
  }
  return out;
}

std::string PyStringRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t cp = NextCodepoint(s, &pos);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out.append("\\t");
    } else if (cp == '\n') {
      out.append("\\n");
    } else if (cp == '\r') {
      out.append("\\r");
    } else if (IsNonPrintable(cp)) {
      if (cp <= 0xFF) {
        out.append("\\x");
        AppendHex(cp, 2, &out);
      } else if (cp <= 0xFFFF) {
        out.append("\\u");
        AppendHex(cp, 4, &out);
      } else {
        out.append("\\U");
        AppendHex(cp, 8, &out);
      }
    } else {
      out.append(s.substr(start, pos - start));
    }
  }
  out.push_back(quote);
  return out;
}

absl::Status AppendPyStr(const Value& v, size_t max_bytes, std::string* out) {
  return Formatter(max_bytes, out).Str(v);
}

absl::Status AppendPyRepr(const Value& v, size_t max_bytes, std::string* out) {
  return Formatter(max_bytes, out).Repr(v, 0);
}

absl::Status AppendJson(const Value& v, const JsonOptions& options, size_t max_bytes,
                        std::string* out) {
  return Formatter(max_bytes, out).Json(v, options, 0);
}

}  // namespace pagellm::chat_template
