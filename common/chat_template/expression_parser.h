// Expression half of the chat-template parser (see parser.h for the grammar it implements).
// Each function mirrors the jinja2.parser.Parser method of the same name and consumes exactly
// the tokens of the construct it returns.
//
// Not thread-safe; works on one TokenStream.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_EXPRESSION_PARSER_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_EXPRESSION_PARSER_H_

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chat_template/ast.h"
#include "common/chat_template/token_stream.h"

namespace pagellm::chat_template {

class ExpressionParser {
 public:
  // REQUIRES: `stream` outlives the parser.
  explicit ExpressionParser(TokenStream* stream) : s_(*stream) {}

  using ExprPtr = std::unique_ptr<Expr>;

  // A full expression; without `with_condexpr`, `a if b else c` is not parsed.
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true);

  // Comma-separated expressions: one expression, or a kTuple when there is a comma. Stops at
  // the end of a tag, at ')' or at a name in `extra_end_names`. With `simplified`, items are
  // names and literals only (assignment targets); `with_namespace` also allows `ns.attr`.
  absl::StatusOr<ExprPtr> ParseTuple(bool simplified = false, bool with_condexpr = true,
                                     const std::vector<std::string_view>& extra_end_names = {},
                                     bool explicit_parentheses = false,
                                     bool with_namespace = false);

  // A chain of `| filter(args)` applied to `operand` (which may be null, for {% set %} blocks),
  // starting at the current '|' (or at the filter name when `start_inline`).
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr operand, bool start_inline = false);

 private:
  absl::StatusOr<ExprPtr> ParseCondExpr();
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter = true);
  absl::StatusOr<ExprPtr> ParsePrimary(bool with_namespace = false);
  absl::StatusOr<ExprPtr> ParseList();
  absl::StatusOr<ExprPtr> ParseDict();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscribed();
  // Parses "(args)" into node->children[1..] and node->keywords.
  absl::Status ParseCallArgs(Expr* node);
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node);

  ExprPtr NewExpr(ExprKind kind) const;
  absl::StatusOr<ExprPtr> Binary(ExprKind kind, BinaryOp op, ExprPtr left, ExprPtr right) const;

  TokenStream& s_;
};

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_EXPRESSION_PARSER_H_
