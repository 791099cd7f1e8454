#include "common/chat_template/py_chartype.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/chat_template/py_string.h"
#include "common/utf8.h"

namespace pagellm::chat_template {
namespace {

// What Python knows about one code point.
struct Traits {
  bool alpha = false;
  bool decimal = false;
  bool digit = false;
  bool numeric = false;
  bool printable = true;
  bool numeric_known = true;  // false: isnumeric unknown here (CJK numeral ideographs)
};

bool In(uint32_t cp, uint32_t lo, uint32_t hi) { return cp >= lo && cp <= hi; }

// Traits of `cp`, or false when unknown.
bool Classify(uint32_t cp, Traits* t) {
  if (cp < 0x80) {
    t->alpha = In(cp, 'A', 'Z') || In(cp, 'a', 'z');
    t->decimal = t->digit = t->numeric = In(cp, '0', '9');
    t->printable = In(cp, 0x20, 0x7E);
    return true;
  }
  if (cp <= 0xFF) {
    t->printable = cp > 0xA0 && cp != 0xAD;
    t->alpha = cp == 0xAA || cp == 0xB5 || cp == 0xBA || (cp >= 0xC0 && cp != 0xD7 && cp != 0xF7);
    t->digit = t->numeric = cp == 0xB2 || cp == 0xB3 || cp == 0xB9;
    t->numeric = t->numeric || In(cp, 0xBC, 0xBE);
    return true;
  }
  std::string c;
  AppendCodepoint(cp, &c);
  if (PyUpper(c) != c || PyLower(c) != c) {  // a cased letter of the case tables
    t->alpha = true;
    return true;
  }
  if (In(cp, 0x4E00, 0x9FFF) || In(cp, 0x3400, 0x4DBF)) {  // CJK ideographs
    t->alpha = true;
    t->numeric_known = false;
    return true;
  }
  if (In(cp, 0x3041, 0x3096) || In(cp, 0x30A1, 0x30FA) || In(cp, 0xAC00, 0xD7A3)) {
    t->alpha = true;  // hiragana, katakana, Hangul syllables
    return true;
  }
  if (In(cp, 0xFF10, 0xFF19)) {  // fullwidth digits
    t->decimal = t->digit = t->numeric = true;
    return true;
  }
  if (In(cp, 0x2000, 0x200F) || In(cp, 0x2028, 0x202F) || In(cp, 0x205F, 0x206F) || cp == 0x3000 ||
      cp == 0xFEFF) {
    t->printable = false;  // spaces, separators, format characters
    return true;
  }
  // Punctuation, symbols, arrows, box drawing, shapes, dingbats, emoji, combining marks,
  // variation selectors: printable, not alphanumeric.
  if (In(cp, 0x0300, 0x036F) || In(cp, 0x2010, 0x2027) || In(cp, 0x2030, 0x205E) ||
      In(cp, 0x20A0, 0x20C0) || In(cp, 0x2190, 0x245F) || In(cp, 0x2500, 0x2775) ||
      In(cp, 0x2794, 0x27BF) || In(cp, 0x3001, 0x3004) || In(cp, 0x3008, 0x3020) ||
      In(cp, 0xFE00, 0xFE0F) || In(cp, 0xFF01, 0xFF0F) || In(cp, 0xFF1A, 0xFF20) ||
      In(cp, 0xFF3B, 0xFF40) || In(cp, 0xFF5B, 0xFF65) || In(cp, 0x1F300, 0x1F64F) ||
      In(cp, 0x1F680, 0x1F6FF) || In(cp, 0x1F900, 0x1F9FF) || In(cp, 0x1FA70, 0x1FAFF)) {
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<bool> PyCharIs(CharClass c, uint32_t cp) {
  Traits t;
  if (!Classify(cp, &t) || (!t.numeric_known && c == CharClass::kNumeric)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("this interpreter does not know the Unicode properties of U+%04X", cp));
  }
  switch (c) {
    case CharClass::kAlpha:
      return t.alpha;
    case CharClass::kDecimal:
      return t.decimal;
    case CharClass::kDigit:
      return t.digit;
    case CharClass::kNumeric:
      return t.numeric;
    case CharClass::kAlnum:
      return t.alpha || t.numeric;
    case CharClass::kWord:
      return t.alpha || t.numeric || cp == '_';
    case CharClass::kPrintable:
      return t.printable;
  }
  return false;
}

}  // namespace pagellm::chat_template
