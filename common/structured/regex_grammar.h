// Regular expressions as grammars: vLLM's structured_outputs.regex / guided_regex (the whole
// output is one full match of the pattern) and a JSON Schema string's "pattern".
//
// Syntax: the regular part of Python's re module (what vLLM users write):
//   literals and escaped metacharacters; . (any character but \n); classes [...] and [^...]
//   with ranges and escapes; \d \w \s and \D \W \S with their ASCII meanings (as re.ASCII,
//   RE2, JavaScript and xgrammar: \d is [0-9]); \t \n \r \f \v \a \0 \xhh \uhhhh
//   \Uhhhhhhhh; groups (...), (?:...), (?P<name>...), (?<name>...) and comments (?#...);
//   alternation |; quantifiers * + ? {n} {n,} {,m} {n,m}, greedy or lazy (the same language
//   for a full match); a literal { where no quantifier is spelled; ^ or \A at the start and $
//   or \Z at the end of the pattern or of one of its top-level alternatives.
// Refused with InvalidArgument naming the construct and its byte offset: backreferences,
// lookaround, \b \B, inline flags, possessive quantifiers and atomic groups (not regular, or a
// different language), anchors elsewhere, a class matching no character, a repeat bound over
// kMaxRegexRepeat, groups nested deeper than kMaxRegexDepth, invalid UTF-8, and what Python
// refuses (nothing to repeat, multiple repeat, unbalanced parentheses, bad ranges, bad escapes).
//
// Characters are Unicode scalar values, matched as their UTF-8 bytes (RegexText::kRaw) or, for
// a JSON string's pattern (kJsonString), as JSON writes them inside the quotes: '"' as \", '\'
// as \\, control characters as \b \f \n \r \t or \u00XX, every other character as its UTF-8
// bytes (never \uXXXX: one spelling per character keeps the grammar small).
//
// Thread-safe: pure functions.
#ifndef PAGELLM_COMMON_STRUCTURED_REGEX_GRAMMAR_H_
#define PAGELLM_COMMON_STRUCTURED_REGEX_GRAMMAR_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/structured/grammar.h"

namespace pagellm::structured {

inline constexpr int kMaxRegexRepeat = 1000;  // the largest n or m in {n,m}
inline constexpr int kMaxRegexDepth = 64;     // groups within groups

enum class RegexText { kRaw, kJsonString };

// The output is a full match of `pattern`.
absl::StatusOr<Grammar> RegexGrammar(std::string_view pattern);

// Adds to `builder` a rule matching exactly the full matches of `pattern`, written as `text`
// says, and returns it.
absl::StatusOr<uint32_t> AddRegexRule(std::string_view pattern, RegexText text,
                                      GrammarBuilder* builder);

}  // namespace pagellm::structured

#endif  // PAGELLM_COMMON_STRUCTURED_REGEX_GRAMMAR_H_
