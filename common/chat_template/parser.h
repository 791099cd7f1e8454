// Parser of the chat-template interpreter: Jinja2's grammar (jinja2.parser, 3.1) for the
// statements chat templates use: if/elif/else, for (with tuple targets, an `if` filter,
// `recursive` and else), set (names, tuples, `ns.attr`, and the {% set x %}..{% endset %}
// block), macro, call, filter and with blocks, break and continue (the loopcontrols extension;
// not inside a macro or call block, which are functions in Jinja2), and generation
// (transformers' AssistantTracker), with Jinja2's full expression syntax except *args/**kwargs
// in calls. Operator precedence, from loosest: `x if c else y`, or, and, not, comparisons and
// `in` (chained), + -, ~, * / // %, **, unary - +, then postfix .attr [item] [a:b:c] (call),
// | filter and `is` test.
//
// Errors are InvalidArgument "chat template syntax error, line N: ...": unknown or unsupported
// tags (include, import, from, extends, block, autoescape, do, trans; raw is handled by the
// lexer), a missing end tag, break/continue outside a loop, a parameter without a default
// after one with a default, nesting past ParseOptions::max_nesting_depth.
//
// Thread-safe: a pure function.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_PARSER_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/chat_template/ast.h"
#include "common/chat_template/lexer.h"
#include "common/chat_template/options.h"

namespace pagellm::chat_template {

// Parses the tokens of a whole template (ending in kEof).
absl::StatusOr<Body> ParseTemplate(const std::vector<Token>& tokens, const ParseOptions& options);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_PARSER_H_
