// UTF-8 helpers (tokenizer, model-file and request validation): validation, replacement of invalid
// bytes, character iteration. Invalid input is replaced, never rejected: each maximal subpart of an
// ill-formed sequence becomes one U+FFFD (Unicode ch. 3 "substitution of maximal subparts", the
// policy of Rust's String::from_utf8_lossy, which HF tokenizers' decoders use).
//
// All functions are pure and thread-safe.
#ifndef PAGELLM_COMMON_UTF8_H_
#define PAGELLM_COMMON_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pagellm {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// True if `s` is well-formed UTF-8 (no surrogates, no overlongs, nothing above U+10FFFF).
[[nodiscard]] bool IsValidUtf8(std::string_view s);

// Appends `in` to `out` with every invalid sequence replaced by U+FFFD, and returns how many
// bytes of `in` were consumed. With `at_end` false, a trailing sequence that is incomplete but
// could still become valid is left unconsumed (for streaming); with `at_end` true everything is
// consumed and such a tail becomes one U+FFFD.
size_t AppendSanitizedUtf8(std::string_view in, bool at_end, std::string* out);

// Returns `in` with invalid sequences replaced by U+FFFD.
[[nodiscard]] std::string SanitizeUtf8(std::string_view in);

// Length in bytes of the character starting at s[pos].
// REQUIRES: `s` is valid UTF-8 and pos < s.size() is the start of a character.
[[nodiscard]] inline size_t Utf8CharLen(std::string_view s, size_t pos) {
  const auto b = static_cast<uint8_t>(s[pos]);
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

// Appends the UTF-8 encoding of `cp` (REQUIRES: a Unicode scalar value) to `out`.
void AppendCodepoint(uint32_t cp, std::string* out);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_UTF8_H_
