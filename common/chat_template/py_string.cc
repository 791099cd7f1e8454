#include "common/chat_template/py_string.h"

#include <algorithm>

#include "common/utf8.h"

namespace pagellm::chat_template {
namespace {

// Start offsets of the characters of `s`, plus s.size() at the end.
std::vector<size_t> CharOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  for (size_t pos = 0; pos < s.size();) {
    offsets.push_back(pos);
    NextCodepoint(s, &pos);
  }
  offsets.push_back(s.size());
  return offsets;
}

bool InSet(uint32_t cp, const std::optional<std::vector<uint32_t>>& set) {
  if (!set) return IsPySpace(cp);
  return std::find(set->begin(), set->end(), cp) != set->end();
}

// Whitespace split (sep unset): parts left to right, at most `maxsplit` splits (< 0: no limit).
std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    // Skip leading whitespace.
    while (pos < s.size()) {
      size_t next = pos;
      if (!IsPySpace(NextCodepoint(s, &next))) break;
      pos = next;
    }
    if (pos >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
      parts.emplace_back(s.substr(pos));
      break;
    }
    size_t end = pos;
    while (end < s.size()) {
      size_t next = end;
      if (IsPySpace(NextCodepoint(s, &next))) break;
      end = next;
    }
    parts.emplace_back(s.substr(pos, end - pos));
    pos = end;
  }
  return parts;
}

std::vector<std::string> RSplitWhitespace(std::string_view s, int64_t maxsplit) {
  std::vector<size_t> offsets = CharOffsets(s);
  auto is_space_at = [&](size_t i) {  // i: character index
    size_t p = offsets[i];
    return IsPySpace(NextCodepoint(s, &p));
  };
  std::vector<std::string> parts;
  size_t end = offsets.size() - 1;  // character index one past the current part
  while (true) {
    while (end > 0 && is_space_at(end - 1)) --end;
    if (end == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
      parts.emplace_back(s.substr(0, offsets[end]));
      break;
    }
    size_t begin = end;
    while (begin > 0 && !is_space_at(begin - 1)) --begin;
    parts.emplace_back(s.substr(offsets[begin], offsets[end] - offsets[begin]));
    end = begin;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

// Simple case mappings (UnicodeData.txt) for Latin (ASCII, Latin-1, Extended-A, Extended
// Additional), the Latin digraphs, Greek, Cyrillic, Armenian and fullwidth Latin; 0 when `c` has
// no partner here.
uint32_t LowerOf(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0xC0) return 0;
  if (c <= 0xDE) return c == 0xD7 ? 0 : c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if ((c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) {
      return c % 2 == 0 ? c + 1 : 0;
    }
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return c % 2 == 1 ? c + 1 : 0;
    return 0;
  }
  if (c == 0x1C4 || c == 0x1C7 || c == 0x1CA || c == 0x1F1) return c + 2;
  if (c == 0x1C5 || c == 0x1C8 || c == 0x1CB || c == 0x1F2) return c + 1;
  if (c >= 0x391 && c <= 0x3A9) return c == 0x3A2 ? 0 : c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) || (c >= 0x4D0 && c <= 0x52F)) {
    return c % 2 == 0 ? c + 1 : 0;
  }
  if (c >= 0x4C1 && c <= 0x4CE) return c % 2 == 1 ? c + 1 : 0;
  if (c == 0x4C0) return 0x4CF;
  if (c >= 0x531 && c <= 0x556) return c + 48;
  if ((c >= 0x1E00 && c <= 0x1E95) || (c >= 0x1EA0 && c <= 0x1EFF)) return c % 2 == 0 ? c + 1 : 0;
  if (c == 0x1E9E) return 0xDF;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return 0;
}

uint32_t UpperOf(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0xB5) return 0;
  if (c == 0xB5) return 0x39C;
  if (c >= 0xE0 && c <= 0xFE) return c == 0xF7 ? 0 : c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    if ((c <= 0x12F) || (c >= 0x133 && c <= 0x137) || (c >= 0x14B && c <= 0x177)) {
      return c % 2 == 1 ? c - 1 : 0;
    }
    if ((c >= 0x13A && c <= 0x148) || (c >= 0x17A && c <= 0x17E)) return c % 2 == 0 ? c - 1 : 0;
    return 0;
  }
  if (c == 0x1C6 || c == 0x1C9 || c == 0x1CC || c == 0x1F3) return c - 2;
  if (c == 0x1C5 || c == 0x1C8 || c == 0x1CB || c == 0x1F2) return c - 1;
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if ((c >= 0x461 && c <= 0x481) || (c >= 0x48B && c <= 0x4BF) || (c >= 0x4D1 && c <= 0x52F)) {
    return c % 2 == 1 ? c - 1 : 0;
  }
  if (c >= 0x4C2 && c <= 0x4CE) return c % 2 == 0 ? c - 1 : 0;
  if (c == 0x4CF) return 0x4C0;
  if (c >= 0x561 && c <= 0x586) return c - 48;
  if ((c >= 0x1E01 && c <= 0x1E95) || (c >= 0x1EA1 && c <= 0x1EFF)) return c % 2 == 1 ? c - 1 : 0;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
  return 0;
}

// Lowercase letters without a single-character uppercase (their full mappings are below).
bool IsSpecialLower(uint32_t c) {
  return c == 0xDF || c == 0x138 || c == 0x149 || (c >= 0xFB00 && c <= 0xFB06) ||
         (c >= 0x1E96 && c <= 0x1E9D);
}

bool IsTitleCase(uint32_t c) { return c == 0x1C5 || c == 0x1C8 || c == 0x1CB || c == 0x1F2; }
bool IsUpperCase(uint32_t c) { return c == 0x130 || (LowerOf(c) != 0 && !IsTitleCase(c)); }
bool IsLowerCase(uint32_t c) { return IsSpecialLower(c) || (UpperOf(c) != 0 && !IsTitleCase(c)); }
// Python's "cased": an uppercase, lowercase or titlecase letter.
bool IsCased(uint32_t c) { return IsUpperCase(c) || IsLowerCase(c) || IsTitleCase(c); }

// Full case mappings (SpecialCasing.txt) of the characters above that have them.
const char* FullUpper(uint32_t c) {
  switch (c) {
    case 0xDF:
      return "SS";
    case 0x149:
      return "\u02BCN";
    case 0xFB00:
      return "FF";
    case 0xFB01:
      return "FI";
    case 0xFB02:
      return "FL";
    case 0xFB03:
      return "FFI";
    case 0xFB04:
      return "FFL";
    case 0xFB05:
    case 0xFB06:
      return "ST";
    default:
      return nullptr;
  }
}

const char* FullTitle(uint32_t c) {
  switch (c) {
    case 0xDF:
      return "Ss";
    case 0x149:
      return "\u02BCN";
    case 0xFB00:
      return "Ff";
    case 0xFB01:
      return "Fi";
    case 0xFB02:
      return "Fl";
    case 0xFB03:
      return "Ffi";
    case 0xFB04:
      return "Ffl";
    case 0xFB05:
    case 0xFB06:
      return "St";
    default:
      return nullptr;
  }
}

void AppendUpper(uint32_t c, std::string* out) {
  if (const char* full = FullUpper(c)) {
    out->append(full);
    return;
  }
  const uint32_t upper = UpperOf(c);
  AppendCodepoint(upper != 0 ? upper : c, out);
}

void AppendLower(uint32_t c, std::string* out) {
  if (c == 0x130) {  // capital I with dot above: "i" + combining dot above
    out->append("i\u0307");
    return;
  }
  const uint32_t lower = LowerOf(c);
  AppendCodepoint(lower != 0 ? lower : c, out);
}

void AppendTitle(uint32_t c, std::string* out) {
  if (const char* full = FullTitle(c)) {
    out->append(full);
    return;
  }
  if (c == 0x1C4 || c == 0x1C6 || c == 0x1C7 || c == 0x1C9 || c == 0x1CA || c == 0x1CC) {
    AppendCodepoint(c == 0x1C4 || c == 0x1C6   ? 0x1C5
                    : c == 0x1C7 || c == 0x1C9 ? 0x1C8
                                               : 0x1CB,
                    out);
    return;
  }
  if (c == 0x1F1 || c == 0x1F3) {
    AppendCodepoint(0x1F2, out);
    return;
  }
  if (IsTitleCase(c)) {
    AppendCodepoint(c, out);
    return;
  }
  AppendUpper(c, out);
}

}  // namespace

uint32_t NextCodepoint(std::string_view s, size_t* pos) {
  const auto b0 = static_cast<uint8_t>(s[*pos]);
  size_t len = b0 < 0x80             ? 1
               : (b0 & 0xE0) == 0xC0 ? 2
               : (b0 & 0xF0) == 0xE0 ? 3
               : (b0 & 0xF8) == 0xF0 ? 4
                                     : 1;
  if (len == 1 || *pos + len > s.size()) {
    *pos += 1;
    return b0;
  }
  uint32_t cp = len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t i = 1; i < len; ++i) {
    const auto b = static_cast<uint8_t>(s[*pos + i]);
    if ((b & 0xC0) != 0x80) {
      *pos += 1;
      return b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  *pos += len;
  return cp;
}

bool IsPySpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::vector<std::string_view> SplitChars(std::string_view s) {
  std::vector<std::string_view> chars;
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    NextCodepoint(s, &pos);
    chars.push_back(s.substr(start, pos - start));
  }
  return chars;
}

size_t CodepointCount(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) NextCodepoint(s, &pos);
  return n;
}

std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left,
                    bool right) {
  std::optional<std::vector<uint32_t>> set;
  if (chars) {
    set.emplace();
    for (size_t pos = 0; pos < chars->size();) set->push_back(NextCodepoint(*chars, &pos));
  }
  std::vector<size_t> offsets = CharOffsets(s);
  size_t begin = 0;
  size_t end = offsets.size() - 1;
  auto cp_at = [&](size_t i) {
    size_t p = offsets[i];
    return NextCodepoint(s, &p);
  };
  if (left) {
    while (begin < end && InSet(cp_at(begin), set)) ++begin;
  }
  if (right) {
    while (end > begin && InSet(cp_at(end - 1), set)) --end;
  }
  return std::string(s.substr(offsets[begin], offsets[end] - offsets[begin]));
}

std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right) {
  if (!sep) return from_right ? RSplitWhitespace(s, maxsplit) : SplitWhitespace(s, maxsplit);
  std::vector<std::string> parts;
  if (!from_right) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    parts.emplace_back(s.substr(pos));
    return parts;
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t hit = s.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  parts.emplace_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl,
                      int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    for (std::string_view c : SplitChars(s)) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      out += c;
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::string PyUpper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) AppendUpper(NextCodepoint(s, &pos), &out);
  return out;
}

std::string PyLower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  uint32_t previous = 0;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t cp = NextCodepoint(s, &pos);
    if (cp == 0x3A3 && IsCased(previous)) {  // Greek capital sigma: final form at a word end
      size_t next = pos;
      if (next >= s.size() || !IsCased(NextCodepoint(s, &next))) {
        AppendCodepoint(0x3C2, &out);
        previous = cp;
        continue;
      }
    }
    AppendLower(cp, &out);
    previous = cp;
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const bool first = pos == 0;
    const uint32_t cp = NextCodepoint(s, &pos);
    first ? AppendTitle(cp, &out) : AppendLower(cp, &out);
  }
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t cp = NextCodepoint(s, &pos);
    previous_cased ? AppendLower(cp, &out) : AppendTitle(cp, &out);
    previous_cased = IsCased(cp);
  }
  return out;
}

std::string JinjaTitle(std::string_view s) {
  auto is_separator = [](uint32_t cp) {
    return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || IsPySpace(cp);
  };
  std::string out;
  out.reserve(s.size());
  bool word_start = true;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t cp = NextCodepoint(s, &pos);
    if (is_separator(cp)) {
      // A run of separators is an item of its own: its first character is "raised" (a no-op).
      AppendCodepoint(cp, &out);
      word_start = true;
      continue;
    }
    word_start ? AppendUpper(cp, &out) : AppendLower(cp, &out);
    word_start = false;
  }
  return out;
}

bool PyIsLower(std::string_view s) {
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t cp = NextCodepoint(s, &pos);
    if (IsUpperCase(cp) || IsTitleCase(cp)) return false;
    cased = cased || IsLowerCase(cp);
  }
  return cased;
}

bool PyIsUpper(std::string_view s) {
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t cp = NextCodepoint(s, &pos);
    if (IsLowerCase(cp) || IsTitleCase(cp)) return false;
    cased = cased || IsUpperCase(cp);
  }
  return cased;
}

std::vector<std::string_view> PySplitLines(std::string_view s, bool keepends) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t pos = 0; pos < s.size();) {
    const size_t at = pos;
    const uint32_t cp = NextCodepoint(s, &pos);
    const bool boundary = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c ||
                          (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!boundary) continue;
    if (cp == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    out.push_back(s.substr(start, (keepends ? pos : at) - start));
    start = pos;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

std::string PyPad(std::string_view s, size_t width, std::string_view fill, PyAlign align) {
  const size_t len = CodepointCount(s);
  if (len >= width) return std::string(s);
  const size_t margin = width - len;
  size_t left = 0;
  if (align == PyAlign::kRight) {
    left = margin;
  } else if (align == PyAlign::kCenter) {
    left = margin / 2 + (margin & width & 1);  // as CPython's str.center
  }
  std::string out;
  out.reserve(s.size() + margin * fill.size());
  for (size_t i = 0; i < left; ++i) out.append(fill);
  out.append(s);
  for (size_t i = left; i < margin; ++i) out.append(fill);
  return out;
}

std::string PySwapCase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t at = pos;
    const uint32_t cp = NextCodepoint(s, &pos);
    if (IsUpperCase(cp)) {
      AppendLower(cp, &out);
    } else if (IsLowerCase(cp)) {
      AppendUpper(cp, &out);
    } else {
      out.append(s.substr(at, pos - at));
    }
  }
  return out;
}

}  // namespace pagellm::chat_template
