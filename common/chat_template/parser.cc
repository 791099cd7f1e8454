// Statement half of the parser. Like jinja2.parser.subparse, ParseBody collects statements until
// a block tag whose name is one of the caller's end names, and leaves the stream on that name;
// the caller consumes it, and the enclosing ParseBody consumes the tag's closing %}.
#include "common/chat_template/parser.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/chat_template/expression_parser.h"
#include "common/chat_template/token_stream.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {
namespace {

using ExprPtr = std::unique_ptr<Expr>;
using EndNames = std::vector<std::string_view>;

// Tags of Jinja2 that this interpreter does not implement, for a clearer error.
constexpr std::string_view kUnsupportedTags[] = {
    "include", "import", "from", "extends", "block", "autoescape", "do", "trans", "pluralize"};

// Jinja2's find_undeclared(body, names): which of `names` the statements read before (in
// visiting order) anything assigns or declares them. Walks Jinja2's node fields in order.
class UndeclaredNames {
 public:
  explicit UndeclaredNames(std::vector<std::string> names) : names_(std::move(names)) {}

  bool Has(std::string_view name) const {
    for (const std::string& n : undeclared_) {
      if (n == name) return true;
    }
    return false;
  }

  void Visit(const Body& body) {
    for (const auto& stmt : body) Visit(*stmt);
  }

 private:
  void Store(const std::string& name) {
    names_.erase(std::remove(names_.begin(), names_.end(), name), names_.end());
  }
  void Load(const std::string& name) {
    if (std::find(names_.begin(), names_.end(), name) != names_.end() && !Has(name)) {
      undeclared_.push_back(name);
    }
  }
  void Visit(const Expr* e) {
    if (e == nullptr) return;
    if (e->kind == ExprKind::kName) Load(e->name);
    for (const auto& child : e->children) Visit(child.get());
  }
  void Visit(const Stmt& stmt) {
    switch (stmt.kind) {
      case StmtKind::kFor:
        for (const std::string& t : stmt.targets) Store(t);
        Visit(stmt.expr.get());
        Visit(stmt.body);
        Visit(stmt.else_body);
        Visit(stmt.condition.get());
        return;
      case StmtKind::kSet:
      case StmtKind::kSetBlock:
        if (stmt.attribute.empty()) {
          for (const std::string& t : stmt.targets) Store(t);
        } else {
          Load(stmt.targets[0]);  // ns.attr: a NSRef, which loads ns
        }
        Visit(stmt.expr.get());
        Visit(stmt.body);
        return;
      case StmtKind::kMacro:
      case StmtKind::kCallBlock:
        if (stmt.kind == StmtKind::kMacro) Store(stmt.name);
        if (stmt.kind == StmtKind::kCallBlock) Visit(stmt.expr.get());
        for (const std::string& p : stmt.params) Store(p);
        for (const auto& d : stmt.defaults) Visit(d.get());
        Visit(stmt.body);
        return;
      case StmtKind::kWith:
        for (const auto& targets : stmt.with_targets) {
          for (const std::string& t : targets) Store(t);
        }
        for (const auto& v : stmt.with_values) Visit(v.get());
        Visit(stmt.body);
        return;
      case StmtKind::kIf:
        for (const IfBranch& branch : stmt.branches) {
          Visit(branch.condition.get());
          Visit(branch.body);
        }
        Visit(stmt.else_body);
        return;
      case StmtKind::kFilterBlock:
        Visit(stmt.body);
        Visit(stmt.expr.get());
        return;
      default:
        Visit(stmt.expr.get());
        Visit(stmt.body);
        return;
    }
  }

  std::vector<std::string> names_;
  std::vector<std::string> undeclared_;
};

class StatementParser {
 public:
  StatementParser(const std::vector<Token>& tokens, const ParseOptions& options)
      : s_(tokens, options), exprs_(&s_) {}

  absl::StatusOr<Body> ParseTemplate() {
    ASSIGN_OR_RETURN(Body body, ParseBody({}));
    if (!s_.Is(TokenKind::kEof)) {
      return s_.Error(absl::StrCat("unexpected ", s_.Describe()));
    }
    return body;
  }

 private:
  std::unique_ptr<Stmt> NewStmt(StmtKind kind) const {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = kind;
    stmt->line = s_.current().line;
    return stmt;
  }

  // Parses statements until a block tag named in `end_names` (stream left on the name) or the
  // end of the template (an error when `end_names` is not empty).
  absl::StatusOr<Body> ParseBody(const EndNames& end_names) {
    Body body;
    while (true) {
      switch (s_.current().kind) {
        case TokenKind::kText: {
          auto stmt = NewStmt(StmtKind::kText);
          stmt->text = s_.current().text;
          s_.Next();
          body.push_back(std::move(stmt));
          break;
        }
        case TokenKind::kVarBegin: {
          s_.Next();
          auto stmt = NewStmt(StmtKind::kOutput);
          ASSIGN_OR_RETURN(stmt->expr, exprs_.ParseTuple());
          RETURN_IF_ERROR(s_.Expect(TokenKind::kVarEnd));
          body.push_back(std::move(stmt));
          break;
        }
        case TokenKind::kBlockBegin: {
          s_.Next();
          for (std::string_view end : end_names) {
            if (s_.IsName(end)) return body;
          }
          ASSIGN_OR_RETURN(std::unique_ptr<Stmt> stmt, ParseStatement());
          RETURN_IF_ERROR(s_.Expect(TokenKind::kBlockEnd));
          body.push_back(std::move(stmt));
          break;
        }
        case TokenKind::kEof:
          if (!end_names.empty()) {
            std::string expected;
            for (std::string_view end : end_names) {
              absl::StrAppend(&expected, expected.empty() ? "" : " or ", "'", std::string(end),
                              "'");
            }
            return s_.Error(absl::StrCat("unexpected end of template, expected ", expected, "."));
          }
          return body;
        default:
          return s_.Error(absl::StrCat("unexpected ", s_.Describe()));
      }
    }
  }

  // Jinja2's parse_statements: [':'] %} body; leaves the stream on the end name.
  absl::StatusOr<Body> ParseStatements(const EndNames& end_names) {
    s_.SkipOp(":");
    RETURN_IF_ERROR(s_.Expect(TokenKind::kBlockEnd));
    return ParseBody(end_names);
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseStatement() {
    NestingGuard guard(&s_);
    RETURN_IF_ERROR(guard.status());
    if (!s_.Is(TokenKind::kName)) return s_.Error("tag name expected");
    const std::string name = s_.current().text;
    if (name == "if") return ParseIf();
    if (name == "for") return ParseFor();
    if (name == "set") return ParseSet();
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return s_.Error(absl::StrCat("'", name, "' outside loop"));
      auto stmt = NewStmt(name == "break" ? StmtKind::kBreak : StmtKind::kContinue);
      s_.Next();
      return stmt;
    }
    if (name == "macro") return ParseMacro();
    if (name == "call") return ParseCallBlock();
    if (name == "filter") return ParseFilterBlock();
    if (name == "with") return ParseWith();
    if (name == "generation") {
      auto stmt = NewStmt(StmtKind::kGeneration);
      s_.Next();
      ASSIGN_OR_RETURN(stmt->body, ParseStatements({"endgeneration"}));
      s_.Next();
      return stmt;
    }
    for (std::string_view unsupported : kUnsupportedTags) {
      if (name == unsupported) {
        return s_.Error(absl::StrCat("the '", name, "' tag is not supported"));
      }
    }
    return s_.Error(absl::StrCat("encountered unknown tag '", name, "'"));
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseIf() {
    auto stmt = NewStmt(StmtKind::kIf);
    s_.Next();  // "if"
    while (true) {
      IfBranch branch;
      ASSIGN_OR_RETURN(branch.condition, exprs_.ParseTuple(false, /*with_condexpr=*/false));
      ASSIGN_OR_RETURN(branch.body, ParseStatements({"elif", "else", "endif"}));
      stmt->branches.push_back(std::move(branch));
      if (s_.SkipName("elif")) continue;
      if (s_.SkipName("else")) {
        ASSIGN_OR_RETURN(stmt->else_body, ParseStatements({"endif"}));
      }
      s_.Next();  // "endif"
      return stmt;
    }
  }

  // Names of an assignment target: `x`, `a, b`, `(a, b)`; `ns.attr` when `with_namespace`.
  absl::Status ParseTargets(const EndNames& end_names, bool with_namespace, Stmt* stmt) {
    ASSIGN_OR_RETURN(ExprPtr target, exprs_.ParseTuple(/*simplified=*/true, true, end_names, false,
                                                       with_namespace));
    if (target->kind == ExprKind::kName) {
      stmt->targets.push_back(target->name);
      return absl::OkStatus();
    }
    if (target->kind == ExprKind::kGetAttr) {
      stmt->targets.push_back(target->children[0]->name);
      stmt->attribute = target->name;
      return absl::OkStatus();
    }
    if (target->kind == ExprKind::kTuple) {
      for (const ExprPtr& item : target->children) {
        if (item->kind != ExprKind::kName) {
          return s_.Error("can only unpack into names here");
        }
        stmt->targets.push_back(item->name);
      }
      return absl::OkStatus();
    }
    return s_.Error("can't assign to this expression");
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseFor() {
    auto stmt = NewStmt(StmtKind::kFor);
    s_.Next();  // "for"
    RETURN_IF_ERROR(ParseTargets({"in"}, /*with_namespace=*/false, stmt.get()));
    RETURN_IF_ERROR(s_.ExpectName("in"));
    ASSIGN_OR_RETURN(stmt->expr, exprs_.ParseTuple(false, /*with_condexpr=*/false, {"recursive"}));
    if (s_.SkipName("if")) {
      ASSIGN_OR_RETURN(stmt->condition, exprs_.ParseExpression());
    }
    stmt->recursive = s_.SkipName("recursive");
    ++loop_depth_;
    absl::StatusOr<Body> body = ParseStatements({"endfor", "else"});
    --loop_depth_;
    if (!body.ok()) return body.status();
    stmt->body = std::move(*body);
    if (s_.SkipName("else")) {
      ASSIGN_OR_RETURN(stmt->else_body, ParseStatements({"endfor"}));
    }
    s_.Next();  // "endfor"
    return stmt;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseSet() {
    auto stmt = NewStmt(StmtKind::kSet);
    s_.Next();  // "set"
    RETURN_IF_ERROR(ParseTargets({}, /*with_namespace=*/true, stmt.get()));
    if (s_.SkipOp("=")) {
      ASSIGN_OR_RETURN(stmt->expr, exprs_.ParseTuple());
      return stmt;
    }
    stmt->kind = StmtKind::kSetBlock;
    if (stmt->targets.size() != 1) return s_.Error("a {% set %} block assigns one name");
    if (s_.IsOp("|")) {
      // {% set x | filter %}: the filters apply to the block's text (a null operand).
      ASSIGN_OR_RETURN(stmt->expr, exprs_.ParseFilter(nullptr));
    }
    ASSIGN_OR_RETURN(stmt->body, ParseStatements({"endset"}));
    s_.Next();  // "endset"
    return stmt;
  }

  // Jinja2's parse_signature: "(" name [= default], ... ")" into stmt->params and defaults.
  absl::Status ParseSignature(Stmt* stmt) {
    RETURN_IF_ERROR(s_.ExpectOp("("));
    while (!s_.IsOp(")")) {
      if (!stmt->params.empty()) RETURN_IF_ERROR(s_.ExpectOp(","));
      ASSIGN_OR_RETURN(std::string param, ExpectAssignableName());
      if (s_.SkipOp("=")) {
        ASSIGN_OR_RETURN(ExprPtr value, exprs_.ParseExpression());
        stmt->defaults.push_back(std::move(value));
      } else if (!stmt->defaults.empty()) {
        return s_.Error("non-default argument follows default argument");
      }
      stmt->params.push_back(std::move(param));
    }
    return s_.ExpectOp(")");
  }

  absl::StatusOr<std::string> ExpectAssignableName() {
    if (!s_.Is(TokenKind::kName))
      return s_.Error(absl::StrCat("expected name, got ", s_.Describe()));
    const std::string name = s_.current().text;
    for (std::string_view constant : {"true", "false", "none", "True", "False", "None"}) {
      if (name == constant) return s_.Error(absl::StrCat("can't assign to '", name, "'"));
    }
    s_.Next();
    return name;
  }

  // The body of a macro or call block: its own function in Jinja2, so no loop encloses it
  // (break and continue there are errors), and what it reads of caller/varargs/kwargs.
  absl::Status ParseMacroBody(std::string_view end, Stmt* stmt) {
    const int loop_depth = loop_depth_;
    loop_depth_ = 0;
    absl::StatusOr<Body> body = ParseStatements({end});
    loop_depth_ = loop_depth;
    if (!body.ok()) return body.status();
    s_.Next();  // the end name
    stmt->body = std::move(*body);
    UndeclaredNames undeclared({"caller", "kwargs", "varargs"});
    undeclared.Visit(stmt->body);
    auto is_param = [&](std::string_view name) {
      return std::find(stmt->params.begin(), stmt->params.end(), name) != stmt->params.end();
    };
    stmt->accesses_caller = undeclared.Has("caller");
    if (stmt->accesses_caller && is_param("caller")) {
      const size_t at =
          std::find(stmt->params.begin(), stmt->params.end(), "caller") - stmt->params.begin();
      if (at + stmt->defaults.size() < stmt->params.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "chat template syntax error, line ", stmt->line,
            ": When defining macros or call blocks the special \"caller\" argument must be "
            "omitted or be given a default."));
      }
      stmt->accesses_caller = false;  // an ordinary parameter
    }
    stmt->accesses_kwargs = undeclared.Has("kwargs") && !is_param("kwargs");
    stmt->accesses_varargs = undeclared.Has("varargs") && !is_param("varargs");
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseMacro() {
    auto stmt = NewStmt(StmtKind::kMacro);
    s_.Next();  // "macro"
    ASSIGN_OR_RETURN(stmt->name, ExpectAssignableName());
    RETURN_IF_ERROR(ParseSignature(stmt.get()));
    RETURN_IF_ERROR(ParseMacroBody("endmacro", stmt.get()));
    return stmt;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseCallBlock() {
    auto stmt = NewStmt(StmtKind::kCallBlock);
    s_.Next();  // "call"
    stmt->name = "caller";
    if (s_.IsOp("(")) RETURN_IF_ERROR(ParseSignature(stmt.get()));
    ASSIGN_OR_RETURN(stmt->expr, exprs_.ParseExpression());
    if (stmt->expr->kind != ExprKind::kCall) return s_.Error("expected call");
    RETURN_IF_ERROR(ParseMacroBody("endcall", stmt.get()));
    return stmt;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseFilterBlock() {
    auto stmt = NewStmt(StmtKind::kFilterBlock);
    s_.Next();  // "filter"
    ASSIGN_OR_RETURN(stmt->expr, exprs_.ParseFilter(nullptr, /*start_inline=*/true));
    ASSIGN_OR_RETURN(stmt->body, ParseStatements({"endfilter"}));
    s_.Next();  // "endfilter"
    return stmt;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseWith() {
    auto stmt = NewStmt(StmtKind::kWith);
    s_.Next();  // "with"
    while (!s_.Is(TokenKind::kBlockEnd)) {
      if (!stmt->with_targets.empty()) RETURN_IF_ERROR(s_.ExpectOp(","));
      Stmt target;
      RETURN_IF_ERROR(ParseTargets({}, /*with_namespace=*/false, &target));
      RETURN_IF_ERROR(s_.ExpectOp("="));
      ASSIGN_OR_RETURN(ExprPtr value, exprs_.ParseExpression());
      stmt->with_targets.push_back(std::move(target.targets));
      stmt->with_values.push_back(std::move(value));
    }
    ASSIGN_OR_RETURN(stmt->body, ParseStatements({"endwith"}));
    s_.Next();  // "endwith"
    return stmt;
  }

  TokenStream s_;
  ExpressionParser exprs_;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> ParseTemplate(const std::vector<Token>& tokens, const ParseOptions& options) {
  return StatementParser(tokens, options).ParseTemplate();
}

}  // namespace pagellm::chat_template
