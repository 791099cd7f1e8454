// A hand-written transcription of jinja2.lexer's regular expressions. The one piece of state
// that crosses tags is `line_starting_`: whether the last thing consumed (a tag's end, with its
// trimmed newline or stripped whitespace) ended in a newline, which lets lstrip_blocks strip the
// indentation of a tag that starts the text following it. Every loop advances `pos_`, so the
// lexer is linear in the source size.
#include "common/chat_template/lexer.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/chat_template/py_string.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pagellm::chat_template {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<uint8_t>(c) >= 0x80;
}
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// Joins the lines of `source` with \n and drops one trailing newline.
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const ParseOptions& options)
      : src_(std::move(source)), options_(options) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      const size_t tag = FindTagStart(pos_);
      if (tag == std::string::npos) {
        EmitText(src_.substr(pos_));
        Advance(src_.size());
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      size_t after = tag + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      const size_t raw_body = kind == '%' ? MatchRawBegin(after) : std::string::npos;

      std::string text = src_.substr(pos_, tag - pos_);
      ApplyLeftControl(&text, sign, /*lstrip_allowed=*/kind != '{');
      EmitText(std::move(text));
      Advance(after);

      if (raw_body != std::string::npos) {
        line_starting_ = src_[raw_body - 1] == '\n';
        Advance(raw_body);
        RETURN_IF_ERROR(LexRaw());
      } else if (kind == '#') {
        RETURN_IF_ERROR(LexComment());
      } else {
        RETURN_IF_ERROR(LexTag(kind == '{'));
      }
    }
    tokens_.push_back(Token{TokenKind::kEof, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  absl::Status Error(std::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template syntax error, line ", line_, ": ", std::string(message)));
  }

  bool At(size_t pos, std::string_view s) const {
    return pos <= src_.size() && src_.size() - pos >= s.size() &&
           src_.compare(pos, s.size(), s.data(), s.size()) == 0;
  }

  size_t FindTagStart(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
        return p;
      }
    }
    return std::string::npos;
  }

  // Position after the run of Python whitespace starting at `pos`.
  size_t SkipSpace(size_t pos) const {
    while (pos < src_.size()) {
      size_t next = pos;
      if (!IsPySpace(NextCodepoint(src_, &next))) break;
      pos = next;
    }
    return pos;
  }

  // Moves to `pos`, counting lines.
  void Advance(size_t pos) {
    for (size_t i = pos_; i < pos; ++i) line_ += src_[i] == '\n';
    pos_ = pos;
  }

  void EmitText(std::string text) {
    if (!text.empty()) tokens_.push_back(Token{TokenKind::kText, std::move(text), 0, 0, line_});
  }

  void Emit(TokenKind kind, std::string text = "") {
    tokens_.push_back(Token{kind, std::move(text), 0, 0, line_});
  }

  // Whitespace control of the text before a tag whose opener carries `sign`.
  void ApplyLeftControl(std::string* text, char sign, bool lstrip_allowed) const {
    if (sign == '-') {
      *text = PyStrip(*text, std::nullopt, /*left=*/false, /*right=*/true);
      return;
    }
    if (sign == '+' || !options_.lstrip_blocks || !lstrip_allowed) return;
    const size_t line_start = text->rfind('\n') + 1;  // 0 when there is no newline
    if (line_start == 0 && !line_starting_) return;
    std::string_view rest = std::string_view(*text).substr(line_start);
    if (rest.empty()) return;
    for (size_t p = 0; p < rest.size();) {
      if (!IsPySpace(NextCodepoint(rest, &p))) return;
    }
    text->resize(line_start);
  }

  // Consumes the end of a block or comment tag at `pos_` whose closer is `closer` ("%}" or
  // "#}"), with `sign` the character before it (0 if none), and sets line_starting_.
  void ConsumeBlockEnd(char sign, size_t closer_size) {
    size_t end = pos_ + (sign ? 1 : 0) + closer_size;
    if (sign == '-') {
      const size_t skipped = SkipSpace(end);
      line_starting_ = skipped > end && src_[skipped - 1] == '\n';
      end = skipped;
    } else if (sign == 0 && options_.trim_blocks && end < src_.size() && src_[end] == '\n') {
      ++end;
      line_starting_ = true;
    } else {
      line_starting_ = false;
    }
    Advance(end);
  }

  // If `after` (just past "{%" and its sign) starts "\s*raw\s*(-%}\s*|%})", returns where the
  // raw body starts, else npos.
  size_t MatchRawBegin(size_t after) const {
    size_t p = SkipSpace(after);
    if (!At(p, "raw")) return std::string::npos;
    p = SkipSpace(p + 3);
    if (At(p, "-%}")) return SkipSpace(p + 3);
    if (At(p, "%}")) return p + 2;
    return std::string::npos;
  }

  absl::Status LexRaw() {
    for (size_t p = src_.find("{%", pos_); p != std::string::npos; p = src_.find("{%", p + 1)) {
      size_t q = p + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = SkipSpace(q);
      if (!At(q, "endraw")) continue;
      q = SkipSpace(q + 6);
      char end_sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q];
      if (!At(q + (end_sign ? 1 : 0), "%}")) continue;
      std::string body = src_.substr(pos_, p - pos_);
      ApplyLeftControl(&body, sign, /*lstrip_allowed=*/true);
      EmitText(std::move(body));
      Advance(q);
      ConsumeBlockEnd(end_sign, 2);
      return absl::OkStatus();
    }
    return Error("missing end of raw directive");
  }

  absl::Status LexComment() {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) return Error("missing end of comment tag");
    char sign = 0;
    if (close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+')) sign = src_[close - 1];
    Advance(sign ? close - 1 : close);
    ConsumeBlockEnd(sign, 2);
    return absl::OkStatus();
  }

  // Lexes the inside of a {{ }} (`is_var`) or {% %} tag, from after its opener to its end.
  absl::Status LexTag(bool is_var) {
    Emit(is_var ? TokenKind::kVarBegin : TokenKind::kBlockBegin);
    std::string balance;  // expected closing brackets
    while (true) {
      if (pos_ >= src_.size()) {
        return Error(is_var ? "unexpected end of template, unclosed '{{'"
                            : "unexpected end of template, unclosed '{%'");
      }
      if (balance.empty()) {
        if (is_var && (At(pos_, "-}}") || At(pos_, "}}"))) {
          Emit(TokenKind::kVarEnd);
          if (src_[pos_] == '-') {
            const size_t skipped = SkipSpace(pos_ + 3);
            line_starting_ = skipped > pos_ + 3 && src_[skipped - 1] == '\n';
            Advance(skipped);
          } else {
            line_starting_ = false;
            Advance(pos_ + 2);
          }
          return absl::OkStatus();
        }
        if (!is_var && (At(pos_, "+%}") || At(pos_, "-%}") || At(pos_, "%}"))) {
          Emit(TokenKind::kBlockEnd);
          const char sign = src_[pos_] == '%' ? 0 : src_[pos_];
          ConsumeBlockEnd(sign, 2);
          return absl::OkStatus();
        }
      }
      const char c = src_[pos_];
      const size_t space_end = SkipSpace(pos_);
      if (space_end > pos_) {
        Advance(space_end);
        continue;
      }
      if (IsDigit(c)) {
        RETURN_IF_ERROR(LexNumber());
        continue;
      }
      if (IsNameStart(c)) {
        size_t end = pos_ + 1;
        while (end < src_.size() && IsNameChar(src_[end])) ++end;
        Emit(TokenKind::kName, src_.substr(pos_, end - pos_));
        Advance(end);
        continue;
      }
      if (c == '\'' || c == '"') {
        RETURN_IF_ERROR(LexString());
        continue;
      }
      RETURN_IF_ERROR(LexOperator(&balance));
    }
  }

  // Length of a digit run with single underscores between digits (`(\d+_)*\d+`) at `p`, or 0.
  size_t DigitRun(size_t p, bool (*is_digit)(char)) const {
    size_t end = p;
    while (end < src_.size() && is_digit(src_[end])) {
      ++end;
      if (end + 1 < src_.size() && src_[end] == '_' && is_digit(src_[end + 1])) ++end;
    }
    return end - p;
  }

  absl::Status LexNumber() {
    const int line = line_;
    // Float: digits, then a fraction and/or an exponent; not right after a '.'.
    const size_t int_len = DigitRun(pos_, IsDigit);
    size_t end = pos_ + int_len;
    bool is_float = false;
    if (pos_ == 0 || src_[pos_ - 1] != '.') {
      if (end + 1 < src_.size() && src_[end] == '.' && DigitRun(end + 1, IsDigit) > 0) {
        end += 1 + DigitRun(end + 1, IsDigit);
        is_float = true;
      }
      if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
        size_t q = end + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        const size_t exp_len = DigitRun(q, IsDigit);
        if (exp_len > 0) {
          end = q + exp_len;
          is_float = true;
        }
      }
    }
    if (is_float) {
      std::string text;
      for (size_t i = pos_; i < end; ++i) {
        if (src_[i] != '_') text.push_back(src_[i]);
      }
      Token t{TokenKind::kFloat, text, 0, std::strtod(text.c_str(), nullptr), line};
      tokens_.push_back(std::move(t));
      Advance(end);
      return absl::OkStatus();
    }
    // Integer: 0b / 0o / 0x prefixes, or decimal (no leading zeros except 0, 00, 0_0, ...).
    int base = 10;
    size_t digits_start = pos_;
    if (src_[pos_] == '0' && pos_ + 1 < src_.size()) {
      const char p = src_[pos_ + 1] | 0x20;
      base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 10;
      if (base != 10) digits_start = pos_ + 2;
    }
    end = digits_start;
    auto digit_ok = [&](char ch) {
      if (base == 2) return ch == '0' || ch == '1';
      if (base == 8) return ch >= '0' && ch <= '7';
      if (base == 16) return IsHex(ch);
      return IsDigit(ch);
    };
    if (base == 10 && src_[pos_] == '0') {
      end = pos_ + 1;  // 0(_?0)*
      while (true) {
        if (end < src_.size() && src_[end] == '0') {
          ++end;
        } else if (end + 1 < src_.size() && src_[end] == '_' && src_[end + 1] == '0') {
          end += 2;
        } else {
          break;
        }
      }
    } else {
      while (true) {  // (_?digit)+ after a prefix, digit(_?digit)* for decimal
        if (end < src_.size() && digit_ok(src_[end])) {
          ++end;
        } else if (end + 1 < src_.size() && src_[end] == '_' && digit_ok(src_[end + 1]) &&
                   (base != 10 || end > digits_start)) {
          end += 2;
        } else {
          break;
        }
      }
      if (end == digits_start) {  // "0x" with no digits: the integer is just "0"
        base = 10;
        digits_start = pos_;
        end = pos_ + 1;
      }
    }
    std::string digits;
    for (size_t i = digits_start; i < end; ++i) {
      if (src_[i] != '_') digits.push_back(src_[i]);
    }
    errno = 0;
    const long long value = std::strtoll(digits.c_str(), nullptr, base);
    if (errno == ERANGE) return Error("integer literal does not fit in 64 bits");
    tokens_.push_back(Token{TokenKind::kInt, "", value, 0, line});
    Advance(end);
    return absl::OkStatus();
  }

  absl::Status LexString() {
    const char quote = src_[pos_];
    const int line = line_;
    std::string value;
    size_t p = pos_ + 1;
    while (true) {
      if (p >= src_.size()) return Error("unterminated string literal");
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        value.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) return Error("unterminated string literal");
      RETURN_IF_ERROR(DecodeEscape(&p, &value));
    }
    tokens_.push_back(Token{TokenKind::kString, std::move(value), 0, 0, line});
    Advance(p + 1);
    return absl::OkStatus();
  }

  // Decodes the escape at src_[*p] == '\\' as Python's unicode-escape codec does after
  // Jinja2's encode("ascii", "backslashreplace").
  absl::Status DecodeEscape(size_t* p, std::string* out) const {
    const char e = src_[*p + 1];
    auto hex = [&](size_t start, int n) -> std::optional<uint32_t> {
      uint32_t v = 0;
      for (int i = 0; i < n; ++i) {
        if (start + i >= src_.size() || !IsHex(src_[start + i])) return std::nullopt;
        const char h = src_[start + i];
        v = v * 16 + (IsDigit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      return v;
    };
    auto append_cp = [&](uint32_t cp) {
      if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
        out->append(kReplacementChar);
      } else {
        AppendCodepoint(cp, out);
      }
    };
    switch (e) {
      case '\n':
        *p += 2;
        return absl::OkStatus();
      case '\\':
      case '\'':
      case '"':
        out->push_back(e);
        *p += 2;
        return absl::OkStatus();
      case 'a':
        out->push_back('\a');
        *p += 2;
        return absl::OkStatus();
      case 'b':
        out->push_back('\b');
        *p += 2;
        return absl::OkStatus();
      case 'f':
        out->push_back('\f');
        *p += 2;
        return absl::OkStatus();
      case 'n':
        out->push_back('\n');
        *p += 2;
        return absl::OkStatus();
      case 'r':
        out->push_back('\r');
        *p += 2;
        return absl::OkStatus();
      case 't':
        out->push_back('\t');
        *p += 2;
        return absl::OkStatus();
      case 'v':
        out->push_back('\v');
        *p += 2;
        return absl::OkStatus();
      case 'x':
      case 'u':
      case 'U': {
        const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        std::optional<uint32_t> cp = hex(*p + 2, n);
        if (!cp) return Error(absl::StrCat("truncated \\", std::string(1, e), " escape"));
        if (*cp > 0x10FFFF) return Error("illegal Unicode character in escape");
        append_cp(*cp);
        *p += 2 + n;
        return absl::OkStatus();
      }
      case 'N':
        return Error("\\N{...} escapes are not supported");
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      uint32_t v = 0;
      size_t q = *p + 1;
      for (int i = 0; i < 3 && q < src_.size() && src_[q] >= '0' && src_[q] <= '7'; ++i, ++q) {
        v = v * 8 + (src_[q] - '0');
      }
      append_cp(v);
      *p = q;
      return absl::OkStatus();
    }
    if (static_cast<uint8_t>(e) >= 0x80) {
      // A backslash before a non-ASCII character escapes the backslash that backslashreplace
      // put in front of it: the result is "\" followed by "xe9" / "u4f60" / "U0001f600".
      size_t q = *p + 1;
      const uint32_t cp = NextCodepoint(src_, &q);
      out->push_back('\\');
      char buf[16];
      std::snprintf(buf, sizeof(buf), cp <= 0xFF ? "x%02x" : cp <= 0xFFFF ? "u%04x" : "U%08x", cp);
      out->append(buf);
      *p = q;
      return absl::OkStatus();
    }
    // Unknown escapes are kept as they are.
    out->push_back('\\');
    out->push_back(e);
    *p += 2;
    return absl::OkStatus();
  }

  absl::Status LexOperator(std::string* balance) {
    static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwoChar) {
      if (At(pos_, op)) {
        Emit(TokenKind::kOperator, std::string(op));
        Advance(pos_ + 2);
        return absl::OkStatus();
      }
    }
    const char c = src_[pos_];
    static constexpr std::string_view kOneChar = "+-/*%~[](){}><=.:|,;";
    if (kOneChar.find(c) == std::string_view::npos) {
      size_t q = pos_;
      const uint32_t cp = NextCodepoint(src_, &q);
      char buf[16];
      std::snprintf(buf, sizeof(buf), "U+%04X", cp);
      return Error(absl::StrCat("unexpected character ", buf));
    }
    if (c == '(' || c == '[' || c == '{') {
      if (balance->size() >= 1000) return Error("brackets nested too deeply");
      balance->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance->empty()) return Error(absl::StrCat("unexpected '", std::string(1, c), "'"));
      if (balance->back() != c) {
        return Error(absl::StrCat("unexpected '", std::string(1, c), "', expected '",
                                  std::string(1, balance->back()), "'"));
      }
      balance->pop_back();
    }
    Emit(TokenKind::kOperator, std::string(1, c));
    Advance(pos_ + 1);
    return absl::OkStatus();
  }

  const std::string src_;
  const ParseOptions options_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source, const ParseOptions& options) {
  return Lexer(NormalizeNewlines(source), options).Run();
}

}  // namespace pagellm::chat_template
