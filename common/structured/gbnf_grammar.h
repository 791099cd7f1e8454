// GBNF grammars as grammars: vLLM's structured_outputs.grammar / guided_grammar, in the format
// llama.cpp defined and vLLM's xgrammar backend reads. The output is a match of the rule named
// root.
//
// Syntax:
//   name ::= alternatives      one definition per rule; names of letters, digits, '-' and '_'
//   "text"                     a literal, with escapes \n \r \t \\ \" \[ \] \xHH \uHHHH
//                              \UHHHHHHHH (other punctuation escapes itself)
//   [a-z_] [^"\\]              a class of characters and ranges, with the same escapes
//   .                          any character
//   name                       a reference to a rule (defined before or after)
//   ( ... )  a | b             grouping, alternation
//   * + ? {m} {m,} {m,n} {,n}  repeats (bounds at most kMaxRegexRepeat, regex_grammar.h)
//   # ...                      a comment to the end of the line
// Whitespace and newlines separate items; a definition ends where the next "name ::=" begins
// (so every grammar llama.cpp reads, one definition per line or continued inside parentheses,
// reads the same). Characters are Unicode scalar values matched as UTF-8.
// Refused with InvalidArgument naming the rule or the byte offset: syntax errors, a rule
// referenced but not defined or defined twice, no rule named root, left recursion (a rule
// reaching itself before matching a character; llama.cpp refuses it too), an empty class,
// groups nested deeper than kMaxRegexDepth, and grammars over GrammarLimits.
//
// Thread-safe: a pure function.
#ifndef PAGELLM_COMMON_STRUCTURED_GBNF_GRAMMAR_H_
#define PAGELLM_COMMON_STRUCTURED_GBNF_GRAMMAR_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "common/structured/grammar.h"

namespace pagellm::structured {

absl::StatusOr<Grammar> GbnfGrammar(std::string_view text);

}  // namespace pagellm::structured

#endif  // PAGELLM_COMMON_STRUCTURED_GBNF_GRAMMAR_H_
