// Python's character classes (str.isalpha, isdigit, ... and the regex \w) for the code points
// this interpreter knows: all of ASCII and Latin-1, the letters of py_string.h's case tables,
// CJK ideographs, kana and Hangul syllables, and the common punctuation, space, symbol, arrow,
// box-drawing and emoji blocks. Python consults the whole Unicode database; for a code point
// outside these ranges PyCharIs fails with InvalidArgument instead of guessing.
//
// Pure and thread-safe.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_PY_CHARTYPE_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_PY_CHARTYPE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pagellm::chat_template {

enum class CharClass {
  kAlpha,      // str.isalpha
  kDecimal,    // str.isdecimal
  kDigit,      // str.isdigit
  kNumeric,    // str.isnumeric
  kAlnum,      // str.isalnum
  kWord,       // re's \w: alnum or '_'
  kPrintable,  // str.isprintable
};

// Whether `cp` is in class `c`; InvalidArgument for a code point outside the known ranges.
absl::StatusOr<bool> PyCharIs(CharClass c, uint32_t cp);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_PY_CHARTYPE_H_
