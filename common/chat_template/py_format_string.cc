// Design: one format-spec parser (Spec) and one padding routine (Pad) serve both str.format and
// printf-style formatting: a conversion first builds the sign, the prefix (0x, ...) and the
// digits or text, then Pad aligns them. Number digits come from snprintf, whose %e/%f/%g agree
// with CPython's (both round the exact binary value correctly); widths count code points.
#include "common/chat_template/py_format_string.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/chat_template/operators.h"
#include "common/chat_template/py_chartype.h"
#include "common/chat_template/py_format.h"
#include "common/chat_template/py_string.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pagellm::chat_template {
namespace {

absl::Status Unsupported(std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(what), " is not supported in this interpreter's string formatting"));
}

absl::Status TooLarge(size_t max_bytes) {
  return absl::InvalidArgumentError(
      absl::StrCat("formatted string exceeds the limit of ", max_bytes, " bytes"));
}

// A parsed format spec (Python's format-spec mini-language).
struct Spec {
  std::string fill;  // one character; empty: not given
  char align = 0;    // '<', '>', '^', '=' or 0
  char sign = 0;     // '+', '-', ' ' or 0
  bool alternate = false;
  bool zero = false;
  size_t width = 0;
  char grouping = 0;  // ',', '_' or 0
  std::optional<size_t> precision;
  char type = 0;  // 0: none
};

// Reads a decimal number at s[*pos]; false if there is none. Fails past `max`.
absl::StatusOr<bool> ReadNumber(std::string_view s, size_t* pos, size_t max, size_t* out) {
  if (*pos >= s.size() || s[*pos] < '0' || s[*pos] > '9') return false;
  size_t n = 0;
  while (*pos < s.size() && s[*pos] >= '0' && s[*pos] <= '9') {
    n = n * 10 + (s[*pos] - '0');
    if (n > max) return TooLarge(max);
    ++*pos;
  }
  *out = n;
  return true;
}

absl::StatusOr<Spec> ParseSpec(std::string_view s, size_t max_bytes) {
  Spec spec;
  size_t pos = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (!s.empty()) {
    size_t next = 0;
    NextCodepoint(s, &next);
    if (next < s.size() && is_align(s[next])) {
      spec.fill = std::string(s.substr(0, next));
      spec.align = s[next];
      pos = next + 1;
    } else if (is_align(s[0])) {
      spec.align = s[0];
      pos = 1;
    }
  }
  if (pos < s.size() && (s[pos] == '+' || s[pos] == '-' || s[pos] == ' ')) spec.sign = s[pos++];
  if (pos < s.size() && s[pos] == 'z') return Unsupported("the 'z' format option");
  if (pos < s.size() && s[pos] == '#') {
    spec.alternate = true;
    ++pos;
  }
  if (pos < s.size() && s[pos] == '0') {
    spec.zero = true;
    ++pos;
  }
  RETURN_IF_ERROR(ReadNumber(s, &pos, max_bytes, &spec.width).status());
  if (pos < s.size() && (s[pos] == ',' || s[pos] == '_')) spec.grouping = s[pos++];
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t precision = 0;
    ASSIGN_OR_RETURN(bool found, ReadNumber(s, &pos, max_bytes, &precision));
    if (!found) return absl::InvalidArgumentError("Format specifier missing precision");
    spec.precision = precision;
  }
  if (pos < s.size()) spec.type = s[pos++];
  if (pos < s.size()) return absl::InvalidArgumentError("Invalid format specifier");
  return spec;
}

// Pads `sign + prefix + body` to spec.width code points as `spec` says (numbers align right by
// default, text left).
absl::StatusOr<std::string> Pad(const Spec& spec, std::string_view sign, std::string_view prefix,
                                std::string_view body, bool numeric, size_t max_bytes) {
  std::string fill = spec.fill.empty() ? (spec.zero ? "0" : " ") : spec.fill;
  char align = spec.align != 0 ? spec.align : (spec.zero && numeric ? '=' : (numeric ? '>' : '<'));
  const size_t len = CodepointCount(sign) + CodepointCount(prefix) + CodepointCount(body);
  const size_t margin = spec.width > len ? spec.width - len : 0;
  const size_t bytes = sign.size() + prefix.size() + body.size() + margin * fill.size();
  if (bytes > max_bytes) return TooLarge(max_bytes);
  std::string out;
  auto repeat = [&](size_t n) {
    for (size_t i = 0; i < n; ++i) out += fill;
  };
  switch (align) {
    case '<':
      out.append(sign).append(prefix).append(body);
      repeat(margin);
      break;
    case '^':
      repeat(margin / 2);
      out.append(sign).append(prefix).append(body);
      repeat(margin - margin / 2);
      break;
    case '=':
      out.append(sign).append(prefix);
      repeat(margin);
      out += body;
      break;
    default:
      repeat(margin);
      out.append(sign).append(prefix).append(body);
  }
  return out;
}

// Groups the leading run of digits of `digits` by `size` with `sep`.
std::string Group(std::string_view digits, char sep, size_t size) {
  size_t end = 0;
  while (end < digits.size() && std::isalnum(static_cast<unsigned char>(digits[end])) &&
         digits[end] != 'e' && digits[end] != 'E') {
    ++end;
  }
  std::string out;
  for (size_t i = 0; i < end; ++i) {
    if (i > 0 && (end - i) % size == 0) out += sep;
    out += digits[i];
  }
  out.append(digits.substr(end));
  return out;
}

std::string SignOf(bool negative, char sign) {
  if (negative) return "-";
  if (sign == '+') return "+";
  if (sign == ' ') return " ";
  return "";
}

// The digits of |d| formatted as printf's %<conv> with `precision`, CPython's way for inf and
// nan. `upper` for E, F, G.
std::string FloatDigits(double d, char conv, size_t precision, bool alternate) {
  const double a = std::fabs(d);
  const bool upper = conv == 'E' || conv == 'F' || conv == 'G';
  if (std::isnan(d)) return upper ? "NAN" : "nan";
  if (std::isinf(d)) return upper ? "INF" : "inf";
  const char format[] = {'%',
                         alternate ? '#' : '.',
                         alternate ? '.' : '*',
                         alternate ? '*' : conv,
                         alternate ? conv : '\0',
                         '\0'};
  const int n = std::snprintf(nullptr, 0, format, static_cast<int>(precision), a);
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, static_cast<int>(precision), a);
  out.resize(static_cast<size_t>(n));
  return out;
}

absl::StatusOr<std::string> FormatFloat(double d, const Spec& spec, size_t max_bytes) {
  if (spec.alternate) return Unsupported("'#' with floats");
  if (spec.grouping != 0 && (spec.zero || spec.align == '=')) {
    return Unsupported("zero padding with a thousands separator");
  }
  const bool negative = std::signbit(d) && !std::isnan(d);
  std::string body;
  switch (spec.type) {
    case 0:
      if (spec.precision) return Unsupported("a precision without a type for floats");
      body = FormatPyFloat(std::fabs(d));
      if (std::isnan(d)) body = "nan";
      break;
    case '%':
      body = FloatDigits(d * 100, 'f', spec.precision.value_or(6), false) + "%";
      break;
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      if (spec.precision && *spec.precision > max_bytes) return TooLarge(max_bytes);
      body = FloatDigits(d, spec.type, spec.precision.value_or(6), false);
      break;
    case 'n':
      return Unsupported("the 'n' format type");
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "Unknown format code '", std::string(1, spec.type), "' for object of type 'float'"));
  }
  if (spec.grouping != 0) body = Group(body, spec.grouping, 3);
  return Pad(spec, SignOf(negative, spec.sign), "", body, true, max_bytes);
}

absl::StatusOr<std::string> FormatInt(int64_t i, const Spec& spec, size_t max_bytes) {
  const char type = spec.type;
  if (type == 'e' || type == 'E' || type == 'f' || type == 'F' || type == 'g' || type == 'G' ||
      type == '%') {
    return FormatFloat(static_cast<double>(i), spec, max_bytes);
  }
  if (spec.precision) {
    return absl::InvalidArgumentError("Precision not allowed in integer format specifier");
  }
  if (spec.grouping != 0 && (spec.zero || spec.align == '=')) {
    return Unsupported("zero padding with a thousands separator");
  }
  const bool negative = i < 0;
  const uint64_t a = negative ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
  std::string digits;
  std::string prefix;
  size_t group = 3;
  switch (type) {
    case 0:
    case 'd':
      digits = std::to_string(a);
      break;
    case 'b':
    case 'o':
    case 'x':
    case 'X': {
      const int shift = type == 'b' ? 1 : type == 'o' ? 3 : 4;
      const char* alphabet = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
      uint64_t x = a;
      do {
        digits.insert(digits.begin(), alphabet[x & ((1u << shift) - 1)]);
        x >>= shift;
      } while (x != 0);
      if (spec.alternate) prefix = absl::StrCat("0", std::string(1, type));
      if (spec.grouping == ',') {
        return absl::InvalidArgumentError(
            absl::StrCat("Cannot specify ',' with '", std::string(1, type), "'."));
      }
      group = 4;
      break;
    }
    case 'c':
      if (spec.sign != 0)
        return absl::InvalidArgumentError("Sign not allowed with integer format specifier 'c'");
      if (i < 0 || i > 0x10FFFF) return absl::InvalidArgumentError("%c arg not in range(0x110000)");
      if (i >= 0xD800 && i <= 0xDFFF) return Unsupported("a surrogate character");
      {
        std::string c;
        AppendCodepoint(static_cast<uint32_t>(i), &c);
        return Pad(spec, "", "", c, true, max_bytes);
      }
    case 'n':
      return Unsupported("the 'n' format type");
    default:
      return absl::InvalidArgumentError(absl::StrCat("Unknown format code '", std::string(1, type),
                                                     "' for object of type 'int'"));
  }
  if (spec.grouping != 0) digits = Group(digits, spec.grouping, group);
  return Pad(spec, SignOf(negative, spec.sign), prefix, digits, true, max_bytes);
}

absl::StatusOr<std::string> FormatText(std::string_view s, const Spec& spec, size_t max_bytes) {
  if (spec.type != 0 && spec.type != 's') {
    return absl::InvalidArgumentError(absl::StrCat(
        "Unknown format code '", std::string(1, spec.type), "' for object of type 'str'"));
  }
  if (spec.sign != 0) {
    return absl::InvalidArgumentError("Sign not allowed in string format specifier");
  }
  if (spec.alternate) {
    return absl::InvalidArgumentError("Alternate form (#) not allowed in string format specifier");
  }
  if (spec.grouping != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Cannot specify '", std::string(1, spec.grouping), "' with 's'."));
  }
  if (spec.align == '=') {
    return absl::InvalidArgumentError("'=' alignment not allowed in string format specifier");
  }
  std::string_view body = s;
  if (spec.precision) {
    size_t pos = 0;
    for (size_t n = 0; n < *spec.precision && pos < s.size(); ++n) NextCodepoint(s, &pos);
    body = s.substr(0, pos);
  }
  return Pad(spec, "", "", body, false, max_bytes);
}

// str(v) / repr(v), for the s and r conversions.
absl::StatusOr<std::string> Str(const Value& v, bool repr, size_t max_bytes) {
  std::string out;
  RETURN_IF_ERROR(repr ? AppendPyRepr(v, max_bytes, &out) : AppendPyStr(v, max_bytes, &out));
  return out;
}

// printf's conversion `conv` of `v` with `spec` (its width, precision and flags).
absl::StatusOr<std::string> PercentConvert(char conv, const Value& v, Spec spec, size_t max_bytes) {
  switch (conv) {
    case 's':
    case 'r': {
      ASSIGN_OR_RETURN(std::string s, Str(v, conv == 'r', max_bytes));
      spec.zero = false;
      spec.sign = 0;
      spec.alternate = false;
      if (spec.align != '<') spec.align = '>';  // printf right-aligns unless '-'
      return FormatText(s, spec, max_bytes);
    }
    case 'd':
    case 'i':
    case 'u':
      if (v.is_undefined()) return UndefinedError(v);
      if (v.kind() == ValueKind::kFloat) {
        const double d = std::trunc(v.AsDouble());
        if (!(d > -9.2e18 && d < 9.2e18)) {
          return absl::InvalidArgumentError(
              "integer overflow (this interpreter's ints are 64-bit)");
        }
        spec.type = 'd';
        break;
      }
      if (!v.is_integral()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "%", std::string(1, conv), " format: a real number is required, not ", v.TypeName()));
      }
      spec.type = 'd';
      break;
    case 'o':
    case 'x':
    case 'X':
      if (!v.is_integral()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "%", std::string(1, conv), " format: an integer is required, not ", v.TypeName()));
      }
      spec.type = conv;
      break;
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      if (!v.is_number()) {
        return absl::InvalidArgumentError(absl::StrCat("must be real number, not ", v.TypeName()));
      }
      if (spec.alternate) return Unsupported("'#' with floats");
      spec.type = conv;
      if (!spec.precision) spec.precision = 6;
      return FormatFloat(v.AsDouble(), spec, max_bytes);
    case 'c':
      if (v.is_string()) {
        if (CodepointCount(v.AsString()) != 1) {
          return absl::InvalidArgumentError("%c requires int or char");
        }
        spec.zero = false;
        spec.sign = 0;
        spec.alternate = false;
        if (spec.align != '<') spec.align = '>';
        return FormatText(v.AsString(), spec, max_bytes);
      }
      if (!v.is_integral()) return absl::InvalidArgumentError("%c requires int or char");
      spec.type = 'c';
      spec.zero = false;
      return FormatInt(v.AsInt(), spec, max_bytes);
    case 'a':
      return Unsupported("%a");
    default:
      return absl::InvalidArgumentError("unsupported format character");
  }
  // d, i, u, o, x, X: printf's precision is a minimum number of digits.
  const int64_t i =
      v.kind() == ValueKind::kFloat ? static_cast<int64_t>(std::trunc(v.AsDouble())) : v.AsInt();
  const std::optional<size_t> min_digits = spec.precision;
  spec.precision.reset();
  Spec bare;
  bare.type = spec.type;
  bare.alternate = spec.alternate;
  ASSIGN_OR_RETURN(std::string digits, FormatInt(i, bare, max_bytes));
  // Split what FormatInt made into sign, prefix and digits to re-pad as printf does.
  std::string sign;
  if (!digits.empty() && digits[0] == '-') {
    sign = "-";
    digits.erase(0, 1);
  } else if (spec.sign == '+' || spec.sign == ' ') {
    sign = std::string(1, spec.sign);
  }
  std::string prefix;
  if (spec.alternate && digits.size() >= 2 && digits[0] == '0' &&
      std::isalpha(static_cast<unsigned char>(digits[1]))) {
    prefix = digits.substr(0, 2);
    digits.erase(0, 2);
  }
  if (min_digits && *min_digits > max_bytes) return TooLarge(max_bytes);
  if (min_digits && digits.size() < *min_digits) digits.insert(0, *min_digits - digits.size(), '0');
  Spec pad;
  pad.width = spec.width;
  pad.align = spec.align;
  pad.zero = spec.zero && spec.align != '<';
  return Pad(pad, sign, prefix, digits, true, max_bytes);
}

}  // namespace

absl::StatusOr<std::string> PyFormatValue(const Value& v, std::string_view spec_text,
                                          size_t max_bytes) {
  if (spec_text.empty()) return Str(v, false, max_bytes);
  ASSIGN_OR_RETURN(Spec spec, ParseSpec(spec_text, max_bytes));
  switch (v.kind()) {
    case ValueKind::kBool:
    case ValueKind::kInt:
      return FormatInt(v.AsInt(), spec, max_bytes);
    case ValueKind::kFloat:
      return FormatFloat(v.AsDouble(), spec, max_bytes);
    case ValueKind::kString:
      return FormatText(v.AsString(), spec, max_bytes);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported format string passed to ", v.TypeName(), ".__format__"));
  }
}

absl::StatusOr<std::string> PyPercentFormat(std::string_view fmt, const Value& args,
                                            size_t max_bytes) {
  std::vector<Value> positional;
  if (args.is_tuple()) {
    positional = args.AsList()->items;
  } else {
    positional.push_back(args);
  }
  // Python reads %(key)s from any mapping-like right operand (not a tuple or str), and then
  // does not complain about arguments left unused.
  const bool mapping = args.kind() == ValueKind::kDict || (args.is_sequence() && !args.is_tuple());
  size_t next = 0;
  std::string out;
  for (size_t pos = 0; pos < fmt.size();) {
    const size_t percent = fmt.find('%', pos);
    out.append(fmt.substr(pos, percent == std::string_view::npos ? fmt.npos : percent - pos));
    if (percent == std::string_view::npos) break;
    pos = percent + 1;
    if (pos >= fmt.size()) return absl::InvalidArgumentError("incomplete format");
    std::optional<Value> arg;
    if (fmt[pos] == '(') {
      if (args.kind() != ValueKind::kDict) {
        return absl::InvalidArgumentError("format requires a mapping");
      }
      int nesting = 1;
      size_t end = pos + 1;
      for (; end < fmt.size() && nesting > 0; ++end) {
        if (fmt[end] == '(') ++nesting;
        if (fmt[end] == ')') --nesting;
      }
      if (nesting > 0) return absl::InvalidArgumentError("incomplete format key");
      const std::string key(fmt.substr(pos + 1, end - pos - 2));
      const Value* v = args.AsDict()->Find(key);
      if (v == nullptr) return absl::InvalidArgumentError(PyStringRepr(key));
      arg = *v;
      pos = end;
    }
    Spec spec;
    for (; pos < fmt.size(); ++pos) {
      const char c = fmt[pos];
      if (c == '-') {
        spec.align = '<';
      } else if (c == '+') {
        spec.sign = '+';
      } else if (c == ' ') {
        if (spec.sign != '+') spec.sign = ' ';
      } else if (c == '#') {
        spec.alternate = true;
      } else if (c == '0') {
        spec.zero = true;
      } else {
        break;
      }
    }
    if (spec.align == '<') spec.zero = false;
    if (pos < fmt.size() && fmt[pos] == '*') return Unsupported("'*' widths");
    RETURN_IF_ERROR(ReadNumber(fmt, &pos, max_bytes, &spec.width).status());
    if (pos < fmt.size() && fmt[pos] == '.') {
      ++pos;
      if (pos < fmt.size() && fmt[pos] == '*') return Unsupported("'*' precisions");
      size_t precision = 0;
      RETURN_IF_ERROR(ReadNumber(fmt, &pos, max_bytes, &precision).status());
      spec.precision = precision;
    }
    while (pos < fmt.size() && (fmt[pos] == 'h' || fmt[pos] == 'l' || fmt[pos] == 'L')) ++pos;
    if (pos >= fmt.size()) return absl::InvalidArgumentError("incomplete format");
    const char conv = fmt[pos++];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= positional.size()) {
        return absl::InvalidArgumentError("not enough arguments for format string");
      }
      arg = positional[next++];
    }
    if (std::string_view("sridiuoxXeEfFgGca").find(conv) == std::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported format character '", std::string(1, conv), "' (0x",
                       absl::Hex(static_cast<unsigned char>(conv)), ") at index ", pos - 1));
    }
    ASSIGN_OR_RETURN(std::string piece, PercentConvert(conv, *arg, spec, max_bytes));
    out += piece;
    if (out.size() > max_bytes) return TooLarge(max_bytes);
  }
  if (next < positional.size() && !mapping && (args.is_tuple() || next == 0)) {
    return absl::InvalidArgumentError("not all arguments converted during string formatting");
  }
  return out;
}

absl::StatusOr<std::string> PyStrFormat(std::string_view fmt, const std::vector<Value>& positional,
                                        const std::vector<std::pair<std::string, Value>>& keywords,
                                        size_t max_bytes) {
  std::string out;
  enum class Numbering { kUnknown, kAuto, kManual } numbering = Numbering::kUnknown;
  size_t next = 0;
  for (size_t pos = 0; pos < fmt.size();) {
    const char c = fmt[pos];
    if (c == '}') {
      if (pos + 1 < fmt.size() && fmt[pos + 1] == '}') {
        out += '}';
        pos += 2;
        continue;
      }
      return absl::InvalidArgumentError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      ++pos;
      continue;
    }
    if (pos + 1 < fmt.size() && fmt[pos + 1] == '{') {
      out += '{';
      pos += 2;
      continue;
    }
    const size_t close = fmt.find('}', pos);
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError("Single '{' encountered in format string");
    }
    std::string_view field = fmt.substr(pos + 1, close - pos - 1);
    if (field.find('{') != std::string_view::npos) return Unsupported("nested replacement fields");
    pos = close + 1;
    std::string_view spec;
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    char conversion = 0;
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size()) {
        return absl::InvalidArgumentError("expected ':' after conversion specifier");
      }
      conversion = field[bang + 1];
      field = field.substr(0, bang);
      if (conversion == 'a') return Unsupported("the !a conversion");
      if (conversion != 's' && conversion != 'r') {
        return absl::InvalidArgumentError(
            absl::StrCat("Unknown conversion specifier ", std::string(1, conversion)));
      }
    }
    if (field.find_first_of(".[") != std::string_view::npos) {
      return Unsupported("attribute and index lookups in format fields");
    }
    Value arg;
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t index = next;
      if (field.empty()) {
        if (numbering == Numbering::kManual) {
          return absl::InvalidArgumentError(
              "cannot switch from manual field specification to automatic field numbering");
        }
        numbering = Numbering::kAuto;
        ++next;
      } else {
        if (numbering == Numbering::kAuto) {
          return absl::InvalidArgumentError(
              "cannot switch from automatic field numbering to manual field specification");
        }
        numbering = Numbering::kManual;
        size_t at = 0;
        size_t n = 0;
        ASSIGN_OR_RETURN(bool found, ReadNumber(field, &at, size_t{1} << 30, &n));
        if (!found || at != field.size()) return Unsupported("this field name");
        index = n;
      }
      if (index >= positional.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Replacement index ", index, " out of range for positional args tuple"));
      }
      arg = positional[index];
    } else {
      const std::pair<std::string, Value>* found = nullptr;
      for (const auto& kw : keywords) {
        if (kw.first == field) found = &kw;
      }
      if (found == nullptr) return absl::InvalidArgumentError(PyStringRepr(field));
      arg = found->second;
    }
    if (conversion != 0) {
      ASSIGN_OR_RETURN(std::string converted, Str(arg, conversion == 'r', max_bytes));
      arg = Value::String(std::move(converted));
    }
    ASSIGN_OR_RETURN(std::string piece, PyFormatValue(arg, spec, max_bytes));
    out += piece;
    if (out.size() > max_bytes) return TooLarge(max_bytes);
  }
  return out;
}

}  // namespace pagellm::chat_template
