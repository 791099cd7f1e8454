// Recursion happens only through ParseExpression (parentheses, brackets, arguments), ParseNot
// (`not not x`) and ParseUnary (`- - x`); each of those holds a NestingGuard, so the C++ stack
// depth is bounded by ParseOptions::max_nesting_depth. Left-associative chains (a + b + c,
// a.b.c, x|f|g) are built in loops and bounded by TokenStream::Finish's tree-depth check.
#include "common/chat_template/expression_parser.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {
namespace {

constexpr std::pair<std::string_view, CompareOp> kCompareOps[] = {
    {"==", CompareOp::kEq}, {"!=", CompareOp::kNe}, {"<", CompareOp::kLt},
    {"<=", CompareOp::kLe}, {">", CompareOp::kGt},  {">=", CompareOp::kGe},
};

}  // namespace

ExpressionParser::ExprPtr ExpressionParser::NewExpr(ExprKind kind) const {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = s_.current().line;
  return e;
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::Binary(ExprKind kind, BinaryOp op,
                                                                   ExprPtr left,
                                                                   ExprPtr right) const {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = left->line;
  e->binary_op = op;
  e->children.push_back(std::move(left));
  e->children.push_back(std::move(right));
  return s_.Finish(std::move(e));
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseExpression(bool with_condexpr) {
  NestingGuard guard(&s_);
  RETURN_IF_ERROR(guard.status());
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseCondExpr() {
  ASSIGN_OR_RETURN(ExprPtr expr1, ParseOr());
  while (s_.SkipName("if")) {
    ASSIGN_OR_RETURN(ExprPtr expr2, ParseOr());
    ExprPtr expr3;
    if (s_.SkipName("else")) {
      NestingGuard guard(&s_);
      RETURN_IF_ERROR(guard.status());
      ASSIGN_OR_RETURN(expr3, ParseCondExpr());
    }
    auto node = std::make_unique<Expr>();
    node->kind = ExprKind::kCondExpr;
    node->line = expr1->line;
    node->children.push_back(std::move(expr1));
    node->children.push_back(std::move(expr2));
    node->children.push_back(std::move(expr3));
    ASSIGN_OR_RETURN(expr1, s_.Finish(std::move(node)));
  }
  return expr1;
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseOr() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (s_.SkipName("or")) {
    ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    ASSIGN_OR_RETURN(left,
                     Binary(ExprKind::kOr, BinaryOp::kAdd, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseAnd() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (s_.SkipName("and")) {
    ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    ASSIGN_OR_RETURN(left,
                     Binary(ExprKind::kAnd, BinaryOp::kAdd, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseNot() {
  if (!s_.IsName("not")) return ParseCompare();
  ExprPtr node = NewExpr(ExprKind::kNot);
  s_.Next();
  NestingGuard guard(&s_);
  RETURN_IF_ERROR(guard.status());
  ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
  node->children.push_back(std::move(operand));
  return s_.Finish(std::move(node));
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseCompare() {
  ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  ExprPtr node;
  while (true) {
    std::optional<CompareOp> op;
    if (s_.Is(TokenKind::kOperator)) {
      for (const auto& [text, compare] : kCompareOps) {
        if (s_.current().text == text) op = compare;
      }
      if (op) s_.Next();
    }
    if (!op && s_.SkipName("in")) {
      op = CompareOp::kIn;
    } else if (!op && s_.IsName("not") && s_.look().kind == TokenKind::kName &&
               s_.look().text == "in") {
      s_.Next();
      s_.Next();
      op = CompareOp::kNotIn;
    }
    if (!op) break;
    if (!node) {
      node = NewExpr(ExprKind::kCompare);
      node->line = first->line;
      node->children.push_back(std::move(first));
    }
    ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    node->compare_ops.push_back(*op);
    node->children.push_back(std::move(operand));
  }
  if (!node) return first;
  return s_.Finish(std::move(node));
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseMath1() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  while (s_.IsOp("+") || s_.IsOp("-")) {
    const BinaryOp op = s_.IsOp("+") ? BinaryOp::kAdd : BinaryOp::kSub;
    s_.Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    ASSIGN_OR_RETURN(left, Binary(ExprKind::kBinary, op, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseConcat() {
  ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
  if (!s_.IsOp("~")) return first;
  ExprPtr node = NewExpr(ExprKind::kConcat);
  node->line = first->line;
  node->children.push_back(std::move(first));
  while (s_.SkipOp("~")) {
    ASSIGN_OR_RETURN(ExprPtr next, ParseMath2());
    node->children.push_back(std::move(next));
  }
  return s_.Finish(std::move(node));
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseMath2() {
  ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  while (true) {
    BinaryOp op;
    if (s_.IsOp("*")) {
      op = BinaryOp::kMul;
    } else if (s_.IsOp("/")) {
      op = BinaryOp::kDiv;
    } else if (s_.IsOp("//")) {
      op = BinaryOp::kFloorDiv;
    } else if (s_.IsOp("%")) {
      op = BinaryOp::kMod;
    } else {
      break;
    }
    s_.Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
    ASSIGN_OR_RETURN(left, Binary(ExprKind::kBinary, op, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParsePow() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseUnary());
  while (s_.SkipOp("**")) {
    ASSIGN_OR_RETURN(ExprPtr right, ParseUnary());
    ASSIGN_OR_RETURN(left,
                     Binary(ExprKind::kBinary, BinaryOp::kPow, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseUnary(bool with_filter) {
  ExprPtr node;
  if (s_.IsOp("-") || s_.IsOp("+")) {
    node = NewExpr(s_.IsOp("-") ? ExprKind::kNeg : ExprKind::kPos);
    s_.Next();
    NestingGuard guard(&s_);
    RETURN_IF_ERROR(guard.status());
    ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
    node->children.push_back(std::move(operand));
    ASSIGN_OR_RETURN(node, s_.Finish(std::move(node)));
  } else {
    ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParsePrimary(bool with_namespace) {
  const Token& token = s_.current();
  switch (token.kind) {
    case TokenKind::kName: {
      ExprPtr node = NewExpr(ExprKind::kLiteral);
      const std::string& name = token.text;
      if (name == "true" || name == "True" || name == "false" || name == "False") {
        node->literal = Value::Bool(name == "true" || name == "True");
        node->constant = true;
        s_.Next();
        return node;
      }
      if (name == "none" || name == "None") {
        node->literal = Value::None();
        node->constant = true;
        s_.Next();
        return node;
      }
      node->kind = ExprKind::kName;
      node->name = name;
      s_.Next();
      if (with_namespace && s_.IsOp(".")) {
        s_.Next();
        ExprPtr ref = NewExpr(ExprKind::kGetAttr);
        ASSIGN_OR_RETURN(ref->name, s_.ExpectAnyName());
        ref->children.push_back(std::move(node));
        return s_.Finish(std::move(ref));
      }
      return node;
    }
    case TokenKind::kString: {
      ExprPtr node = NewExpr(ExprKind::kLiteral);
      std::string text;
      while (s_.Is(TokenKind::kString)) {  // adjacent literals concatenate
        text += s_.current().text;
        s_.Next();
      }
      node->literal = Value::String(std::move(text));
      node->constant = true;
      return node;
    }
    case TokenKind::kInt:
    case TokenKind::kFloat: {
      ExprPtr node = NewExpr(ExprKind::kLiteral);
      node->literal = token.kind == TokenKind::kInt ? Value::Int(token.int_value)
                                                    : Value::Float(token.float_value);
      node->constant = true;
      s_.Next();
      return node;
    }
    case TokenKind::kOperator:
      if (token.text == "(") {
        s_.Next();
        ASSIGN_OR_RETURN(ExprPtr node, ParseTuple(false, true, {}, /*explicit_parentheses=*/true));
        RETURN_IF_ERROR(s_.ExpectOp(")"));
        return node;
      }
      if (token.text == "[") return ParseList();
      if (token.text == "{") return ParseDict();
      break;
    default:
      break;
  }
  return s_.Error(absl::StrCat("unexpected ", s_.Describe()));
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseTuple(
    bool simplified, bool with_condexpr, const std::vector<std::string_view>& extra_end_names,
    bool explicit_parentheses, bool with_namespace) {
  ExprPtr tuple = NewExpr(ExprKind::kTuple);
  bool is_tuple = false;
  auto at_end = [&] {
    if (s_.Is(TokenKind::kVarEnd) || s_.Is(TokenKind::kBlockEnd) || s_.IsOp(")")) return true;
    for (std::string_view name : extra_end_names) {
      if (s_.IsName(name)) return true;
    }
    return false;
  };
  while (true) {
    if (!tuple->children.empty()) RETURN_IF_ERROR(s_.ExpectOp(","));
    if (at_end()) break;
    ExprPtr item;
    if (simplified) {
      ASSIGN_OR_RETURN(item, ParsePrimary(with_namespace));
    } else {
      ASSIGN_OR_RETURN(item, ParseExpression(with_condexpr));
    }
    tuple->children.push_back(std::move(item));
    if (!s_.IsOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!tuple->children.empty()) return std::move(tuple->children[0]);
    if (!explicit_parentheses) {
      return s_.Error(absl::StrCat("expected an expression, got ", s_.Describe()));
    }
  }
  return s_.Finish(std::move(tuple));
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseList() {
  ExprPtr node = NewExpr(ExprKind::kList);
  RETURN_IF_ERROR(s_.ExpectOp("["));
  while (!s_.IsOp("]")) {
    if (!node->children.empty()) RETURN_IF_ERROR(s_.ExpectOp(","));
    if (s_.IsOp("]")) break;
    ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
    node->children.push_back(std::move(item));
  }
  RETURN_IF_ERROR(s_.ExpectOp("]"));
  return s_.Finish(std::move(node));
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseDict() {
  ExprPtr node = NewExpr(ExprKind::kDict);
  RETURN_IF_ERROR(s_.ExpectOp("{"));
  while (!s_.IsOp("}")) {
    if (!node->children.empty()) RETURN_IF_ERROR(s_.ExpectOp(","));
    if (s_.IsOp("}")) break;
    ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
    RETURN_IF_ERROR(s_.ExpectOp(":"));
    ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
    node->children.push_back(std::move(key));
    node->children.push_back(std::move(value));
  }
  RETURN_IF_ERROR(s_.ExpectOp("}"));
  return s_.Finish(std::move(node));
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (s_.IsOp(".") || s_.IsOp("[")) {
      ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (s_.IsOp("(")) {
      ExprPtr call = NewExpr(ExprKind::kCall);
      call->line = node->line;
      call->children.push_back(std::move(node));
      RETURN_IF_ERROR(ParseCallArgs(call.get()));
      ASSIGN_OR_RETURN(node, s_.Finish(std::move(call)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (s_.IsOp("|")) {
      ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
    } else if (s_.IsName("is")) {
      ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (s_.IsOp("(")) {
      ExprPtr call = NewExpr(ExprKind::kCall);
      call->line = node->line;
      call->children.push_back(std::move(node));
      RETURN_IF_ERROR(ParseCallArgs(call.get()));
      ASSIGN_OR_RETURN(node, s_.Finish(std::move(call)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseSubscript(ExprPtr node) {
  if (s_.SkipOp(".")) {
    if (s_.Is(TokenKind::kName)) {
      ExprPtr attr = NewExpr(ExprKind::kGetAttr);
      attr->name = s_.current().text;
      s_.Next();
      attr->children.push_back(std::move(node));
      return s_.Finish(std::move(attr));
    }
    if (!s_.Is(TokenKind::kInt)) return s_.Error("expected name or number");
    ExprPtr index = NewExpr(ExprKind::kLiteral);
    index->literal = Value::Int(s_.current().int_value);
    index->constant = true;
    s_.Next();
    ExprPtr item = NewExpr(ExprKind::kGetItem);
    item->children.push_back(std::move(node));
    item->children.push_back(std::move(index));
    return s_.Finish(std::move(item));
  }
  const int line = s_.current().line;
  RETURN_IF_ERROR(s_.ExpectOp("["));
  std::vector<ExprPtr> args;
  while (!s_.IsOp("]")) {
    if (!args.empty()) RETURN_IF_ERROR(s_.ExpectOp(","));
    ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
    args.push_back(std::move(arg));
  }
  RETURN_IF_ERROR(s_.ExpectOp("]"));
  if (args.size() == 1 && args[0]->kind == ExprKind::kSlice) {
    args[0]->children[0] = std::move(node);
    return s_.Finish(std::move(args[0]));
  }
  ExprPtr item = NewExpr(ExprKind::kGetItem);
  item->line = line;
  item->children.push_back(std::move(node));
  if (args.size() == 1) {
    item->children.push_back(std::move(args[0]));
  } else {
    ExprPtr tuple = NewExpr(ExprKind::kTuple);
    for (ExprPtr& arg : args) {
      if (arg->kind == ExprKind::kSlice) return s_.Error("slices inside tuple subscripts");
      tuple->children.push_back(std::move(arg));
    }
    ASSIGN_OR_RETURN(tuple, s_.Finish(std::move(tuple)));
    item->children.push_back(std::move(tuple));
  }
  return s_.Finish(std::move(item));
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseSubscribed() {
  // Returns an expression, or a kSlice whose children[0] (the sliced object) is still null.
  ExprPtr slice = NewExpr(ExprKind::kSlice);
  slice->children.resize(4);
  if (!s_.SkipOp(":")) {
    ASSIGN_OR_RETURN(ExprPtr start, ParseExpression());
    if (!s_.SkipOp(":")) return start;
    slice->children[1] = std::move(start);
  }
  if (!s_.IsOp(":") && !s_.IsOp("]") && !s_.IsOp(",")) {
    ASSIGN_OR_RETURN(slice->children[2], ParseExpression());
  }
  if (s_.SkipOp(":") && !s_.IsOp("]") && !s_.IsOp(",")) {
    ASSIGN_OR_RETURN(slice->children[3], ParseExpression());
  }
  return slice;
}

absl::Status ExpressionParser::ParseCallArgs(Expr* node) {
  RETURN_IF_ERROR(s_.ExpectOp("("));
  bool require_comma = false;
  while (!s_.IsOp(")")) {
    if (require_comma) {
      RETURN_IF_ERROR(s_.ExpectOp(","));
      if (s_.IsOp(")")) break;  // trailing comma
    }
    if (s_.IsOp("*") || s_.IsOp("**")) {
      return s_.Error("*args and **kwargs in calls are not supported");
    }
    if (s_.Is(TokenKind::kName) && s_.look().kind == TokenKind::kOperator &&
        s_.look().text == "=") {
      node->keywords.push_back(s_.current().text);
      s_.Next();
      s_.Next();
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      node->children.push_back(std::move(value));
    } else {
      if (!node->keywords.empty()) {
        return s_.Error("invalid syntax for function call expression");
      }
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      node->children.push_back(std::move(value));
    }
    require_comma = true;
  }
  return s_.ExpectOp(")");
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseFilter(ExprPtr operand,
                                                                        bool start_inline) {
  while (s_.IsOp("|") || start_inline) {
    if (!start_inline) s_.Next();
    start_inline = false;
    ExprPtr filter = NewExpr(ExprKind::kFilter);
    ASSIGN_OR_RETURN(filter->name, s_.ExpectAnyName());
    while (s_.SkipOp(".")) {
      ASSIGN_OR_RETURN(std::string part, s_.ExpectAnyName());
      absl::StrAppend(&filter->name, ".", part);
    }
    filter->children.push_back(std::move(operand));
    if (s_.IsOp("(")) RETURN_IF_ERROR(ParseCallArgs(filter.get()));
    ASSIGN_OR_RETURN(operand, s_.Finish(std::move(filter)));
  }
  return operand;
}

absl::StatusOr<ExpressionParser::ExprPtr> ExpressionParser::ParseTest(ExprPtr node) {
  ExprPtr test = NewExpr(ExprKind::kTest);
  s_.Next();  // "is"
  test->negated = s_.SkipName("not");
  ASSIGN_OR_RETURN(test->name, s_.ExpectAnyName());
  while (s_.SkipOp(".")) {
    ASSIGN_OR_RETURN(std::string part, s_.ExpectAnyName());
    absl::StrAppend(&test->name, ".", part);
  }
  test->children.push_back(std::move(node));
  const Token& t = s_.current();
  const bool starts_operand = t.kind == TokenKind::kName || t.kind == TokenKind::kString ||
                              t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat ||
                              (t.kind == TokenKind::kOperator && (t.text == "[" || t.text == "{"));
  if (s_.IsOp("(")) {
    RETURN_IF_ERROR(ParseCallArgs(test.get()));
  } else if (starts_operand && !s_.IsName("else") && !s_.IsName("or") && !s_.IsName("and")) {
    if (s_.IsName("is")) return s_.Error("You cannot chain multiple tests with is");
    ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    test->children.push_back(std::move(arg));
  }
  return s_.Finish(std::move(test));
}

}  // namespace pagellm::chat_template
