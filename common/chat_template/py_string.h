// Python str operations on UTF-8 text, for the chat-template interpreter: Python strings are
// sequences of code points, so lengths, indexes and slices count code points, and strip/split
// use Python's notion of whitespace (str.isspace). Case mapping (upper, lower, title,
// capitalize, islower, isupper) follows Python's full mappings for Latin (ASCII, Latin-1,
// Extended-A and Additional, digraphs), Greek (with final sigma), Cyrillic, Armenian and
// fullwidth Latin; other scripts' letters are left as they are and count as uncased.
//
// Inputs are expected to be valid UTF-8 (the interpreter validates templates and sanitizes
// messages); on invalid input these functions still stay within bounds and never fail.
// All functions are pure and thread-safe.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_PY_STRING_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_PY_STRING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagellm::chat_template {

// Decodes the code point at s[*pos] and advances *pos past it. An invalid byte decodes as itself
// (one byte). REQUIRES: *pos < s.size().
uint32_t NextCodepoint(std::string_view s, size_t* pos);

// Python's str.isspace() for one code point.
bool IsPySpace(uint32_t cp);

// The characters of `s`, each as a view into `s`.
std::vector<std::string_view> SplitChars(std::string_view s);

// len(s) in code points.
size_t CodepointCount(std::string_view s);

// s.strip(chars) / s.lstrip(chars) / s.rstrip(chars); `chars` unset strips whitespace.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left,
                    bool right);

// s.split(sep, maxsplit) (rsplit with `from_right`); `sep` unset splits on runs of whitespace
// and drops empty parts. REQUIRES: sep, if set, is not empty (Python raises ValueError).
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right);

// s.replace(old, new, count); count < 0 replaces all. An empty `old` inserts `repl` between
// characters and at both ends, as Python does.
std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl,
                      int64_t count);

std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
// s.capitalize(): first character in title case, the rest lower.
std::string PyCapitalize(std::string_view s);
// s.title(): a character after a cased one is lowered, any other is title-cased.
std::string PyTitle(std::string_view s);
// Jinja2's `title` filter: words start after runs of "-", whitespace, "(", "{", "[" or "<";
// each word's first character is raised and the rest lowered.
std::string JinjaTitle(std::string_view s);

// True if `s` has at least one cased character and all of them are lower (upper) case.
bool PyIsLower(std::string_view s);
bool PyIsUpper(std::string_view s);

// s.splitlines(keepends): lines end at \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, U+2028, U+2029.
std::vector<std::string_view> PySplitLines(std::string_view s, bool keepends);

// Where padding goes: s.ljust (kLeft), s.rjust (kRight), s.center (kCenter).
enum class PyAlign { kLeft, kRight, kCenter };
// `s` padded with `fill` (one character) to `width` code points, as str.ljust/rjust/center
// pad; `s` itself when it is that long already. The result has at most
// s.size() + width * fill.size() bytes: check that before calling.
std::string PyPad(std::string_view s, size_t width, std::string_view fill, PyAlign align);

// s.swapcase(), with the case mappings above.
std::string PySwapCase(std::string_view s);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_PY_STRING_H_
