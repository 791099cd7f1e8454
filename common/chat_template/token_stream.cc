#include "common/chat_template/token_stream.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pagellm::chat_template {

bool TokenStream::SkipName(std::string_view name) {
  if (!IsName(name)) return false;
  Next();
  return true;
}

bool TokenStream::SkipOp(std::string_view op) {
  if (!IsOp(op)) return false;
  Next();
  return true;
}

absl::Status TokenStream::Expect(TokenKind kind) {
  if (!Is(kind)) {
    const char* what = kind == TokenKind::kBlockEnd ? "end of statement block"
                       : kind == TokenKind::kVarEnd ? "end of print statement"
                       : kind == TokenKind::kName   ? "a name"
                                                    : "another token";
    return Error(absl::StrCat("expected ", what, ", got ", Describe()));
  }
  Next();
  return absl::OkStatus();
}

absl::Status TokenStream::ExpectOp(std::string_view op) {
  if (!SkipOp(op)) return Error(absl::StrCat("expected '", std::string(op), "', got ", Describe()));
  return absl::OkStatus();
}

absl::Status TokenStream::ExpectName(std::string_view name) {
  if (!SkipName(name)) {
    return Error(absl::StrCat("expected '", std::string(name), "', got ", Describe()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TokenStream::ExpectAnyName() {
  if (!Is(TokenKind::kName)) return Error(absl::StrCat("expected a name, got ", Describe()));
  std::string name = current().text;
  Next();
  return name;
}

absl::Status TokenStream::Error(std::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat("chat template syntax error, line ",
                                                 current().line, ": ", std::string(message)));
}

std::string TokenStream::Describe() const {
  const Token& t = current();
  switch (t.kind) {
    case TokenKind::kText:
      return "template text";
    case TokenKind::kVarBegin:
      return "begin of print statement";
    case TokenKind::kVarEnd:
      return "end of print statement";
    case TokenKind::kBlockBegin:
      return "begin of statement block";
    case TokenKind::kBlockEnd:
      return "end of statement block";
    case TokenKind::kName:
    case TokenKind::kOperator:
      return absl::StrCat("'", t.text.substr(0, 40), "'");
    case TokenKind::kString:
      return "string";
    case TokenKind::kInt:
      return "integer";
    case TokenKind::kFloat:
      return "float";
    case TokenKind::kEof:
      return "end of template";
  }
  return "token";
}

absl::Status TokenStream::Enter() {
  if (depth_ >= max_depth_) {
    return Error(absl::StrCat("template nested deeper than ", max_depth_, " levels"));
  }
  ++depth_;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Expr>> TokenStream::Finish(std::unique_ptr<Expr> expr) const {
  int depth = 0;
  bool constant = true;
  for (const auto& child : expr->children) {
    if (child) {
      depth = std::max(depth, child->depth);
      constant = constant && child->constant;
    }
  }
  expr->depth = depth + 1;
  switch (expr->kind) {
    case ExprKind::kName:
    case ExprKind::kCall:
      constant = false;
      break;
    case ExprKind::kCondExpr:  // folds when its test does (and then the branch taken)
      constant = expr->children[1]->constant;
      break;
    case ExprKind::kAnd:  // folds when its left side does (and then the right, if reached)
    case ExprKind::kOr:
      constant = expr->children[0]->constant;
      break;
    case ExprKind::kFilter:  // Jinja2's pass_context filters are never folded
      constant = constant && expr->children[0] != nullptr && expr->name != "map" &&
                 expr->name != "select" && expr->name != "reject" && expr->name != "selectattr" &&
                 expr->name != "rejectattr";
      break;
    default:
      break;
  }
  expr->constant = constant;
  if (expr->depth > max_depth_) {
    return Error(absl::StrCat("expression nested deeper than ", max_depth_, " levels"));
  }
  return expr;
}

}  // namespace pagellm::chat_template
