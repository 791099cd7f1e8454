// Lexer of the chat-template interpreter: splits a Jinja2 template into text and the tokens of
// its `{{ .. }}` and `{% .. %}` tags, the way jinja2.lexer does (Jinja2 3.1):
//   * line endings (\r\n, \r) become \n and one trailing newline is dropped
//     (keep_trailing_newline=False);
//   * whitespace control is applied here, so text tokens come out final: `{%-`, `{{-`, `{#-`
//     strip the whitespace before the tag, `-%}`, `-}}`, `-#}` the whitespace after it;
//     trim_blocks drops one newline after `%}` / `#}` (not after `+%}`); lstrip_blocks drops the
//     whitespace between a line start and `{%` / `{#` (not before `{%+`);
//   * comments `{# .. #}` vanish; `{% raw %}..{% endraw %}` becomes text;
//   * string literals are decoded (Python escapes: \n \t \\ \' \" \xNN \uNNNN \UNNNNNNNN, octal,
//     unknown escapes kept), numbers parsed (0x/0o/0b, underscores, floats with . or e).
// Errors are InvalidArgument naming the line: an unterminated tag, comment, raw block or
// string, an unexpected character, unbalanced brackets inside a tag, an integer past int64.
//
// Thread-safe: a pure function.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_LEXER_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chat_template/options.h"

namespace pagellm::chat_template {

enum class TokenKind {
  kText,        // template text outside tags
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier or keyword
  kString,      // string literal (text holds the decoded value)
  kInt,
  kFloat,
  kOperator,  // text holds the operator: "+", "//", "==", "(", ...
  kEof,
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string text;  // kText, kName, kString, kOperator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;  // 1-based line of the token's start in the source
};

// Tokenizes `source`; the last token is kEof. Applies `options.trim_blocks` and
// `options.lstrip_blocks` (the other options are not used here).
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source, const ParseOptions& options);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_LEXER_H_
