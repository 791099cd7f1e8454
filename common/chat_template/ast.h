// Syntax tree of a parsed chat template: statements (text, {{ output }}, if, for, set, break,
// continue, macro, call, filter, with) holding expressions. Built once by the parser, then only
// read: a tree may be rendered by any number of threads at once. Its depth is bounded by
// ParseOptions::max_nesting_depth, so recursive walks (evaluation, destruction) are bounded.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_AST_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_AST_H_

#include <memory>
#include <string>
#include <vector>

#include "common/chat_template/operators.h"
#include "common/chat_template/value.h"

namespace pagellm::chat_template {

enum class ExprKind {
  kLiteral,   // `literal` (none, bool, int, float or string; never a container)
  kName,      // variable `name`
  kList,      // [children...]
  kTuple,     // (children...)
  kDict,      // {children[0]: children[1], children[2]: children[3], ...}
  kGetAttr,   // children[0].name
  kGetItem,   // children[0][children[1]]
  kSlice,     // children[0][children[1]:children[2]:children[3]]; absent bounds are null
  kCall,      // children[0](arguments)
  kFilter,    // children[0] | name(arguments)
  kTest,      // children[0] is [not] name(arguments)
  kNot,       // not children[0]
  kNeg,       // -children[0]
  kPos,       // +children[0]
  kBinary,    // children[0] binary_op children[1]
  kAnd,       // children[0] and children[1]
  kOr,        // children[0] or children[1]
  kCompare,   // children[0] compare_ops[0] children[1] compare_ops[1] children[2] ...
  kCondExpr,  // children[0] if children[1] else children[2] (null: undefined)
  kConcat,    // children[0] ~ children[1] ~ ...
};

// One expression node. For kCall, kFilter and kTest, the arguments are children[1..]: first
// the positional ones, then one per keyword, named by `keywords` (in order).
struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  int depth = 1;  // height of this subtree
  Value literal;
  std::string name;
  BinaryOp binary_op = BinaryOp::kAdd;
  std::vector<CompareOp> compare_ops;
  std::vector<std::unique_ptr<Expr>> children;
  std::vector<std::string> keywords;
  bool negated = false;  // kTest: `is not`
  // Whether Jinja2's optimizer may fold this subtree into a constant at compile time: no names,
  // calls or context-dependent filters (for `c if t else e`, `a and b`, `a or b`: t or a
  // constant; whether the branch taken is constant shows when folding). It matters for one
  // observable quirk: a folded slice of a value of the wrong type is undefined where a
  // run-time slice is a TypeError (see interpreter.cc: EvalFolded).
  bool constant = false;

  size_t num_positional() const { return children.size() - 1 - keywords.size(); }
};

enum class StmtKind {
  kText,      // template text
  kOutput,    // {{ expr }}
  kIf,        // {% if %}{% elif %}{% else %}{% endif %}
  kFor,       // {% for targets in expr [if condition] %}body{% else %}else_body{% endfor %}
  kSet,       // {% set targets = expr %} / {% set targets[0].attribute = expr %}
  kSetBlock,  // {% set targets[0] %}body{% endset %} / with `.attribute`
  kBreak,
  kContinue,
  kGeneration,   // {% generation %}body{% endgeneration %} (transformers' AssistantTracker)
  kMacro,        // {% macro name(params) %}body{% endmacro %}
  kCallBlock,    // {% call(params) expr %}body{% endcall %}: expr (a call) gets caller=body
  kFilterBlock,  // {% filter expr %}body{% endfilter %}: expr filters a null operand
  kWith,         // {% with targets = values, ... %}body{% endwith %}
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct IfBranch {
  std::unique_ptr<Expr> condition;
  Body body;
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;                  // kText
  std::unique_ptr<Expr> expr;        // kOutput, kSet: the value; kFor: the iterable
  std::vector<IfBranch> branches;    // kIf: the if and elif branches, in order
  Body body;                         // kFor, kSetBlock, kGeneration
  Body else_body;                    // kIf, kFor
  std::vector<std::string> targets;  // kFor: loop variables; kSet, kSetBlock: names assigned
  std::string attribute;             // kSet, kSetBlock: set targets[0].attribute when not empty
  std::unique_ptr<Expr> condition;   // kFor: the `if` filter, or null
  bool recursive = false;            // kFor: `recursive` (the body may call loop(items))

  // kMacro, kCallBlock: the macro's name ("caller" for a call block), its parameters, and the
  // defaults of the last defaults.size() of them; whether its body reads the special names
  // caller, varargs and kwargs (then it accepts them, as Jinja2's Macro does).
  std::string name;
  std::vector<std::string> params;
  std::vector<std::unique_ptr<Expr>> defaults;
  bool accesses_caller = false;
  bool accesses_varargs = false;
  bool accesses_kwargs = false;

  // kWith: with_targets[i] (one or more names) is bound to with_values[i].
  std::vector<std::vector<std::string>> with_targets;
  std::vector<std::unique_ptr<Expr>> with_values;
};

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_AST_H_
