// Design: a tree-walking interpreter. Scopes are a stack of maps: scopes_[0] holds the template
// variables and top-level {% set %}s, and every for-loop iteration pushes a fresh map that is
// popped when the iteration ends (Jinja2's loop scoping, including the reset of loop-local
// assignments on each iteration). Name lookup goes from the innermost scope out, then to the
// builtin globals. Break and continue set `flow_`, which every statement list checks after each
// statement, up to the loop that consumes it.
//
// Recursion is bounded by the tree (ParseOptions::max_nesting_depth); work by RenderLimits
// through the RenderContext; output size by Output::limit.
#include "common/chat_template/interpreter.h"

#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/chat_template/access.h"
#include "common/chat_template/builtins.h"
#include "common/chat_template/operators.h"
#include "common/chat_template/py_format.h"
#include "common/status_macros.h"

namespace pagellm::chat_template {
namespace {

// Where rendered text goes: the template's output or a {% set %} block's capture.
struct Output {
  std::string* text;
  size_t limit;
};

class Interpreter {
 public:
  explicit Interpreter(RenderContext& ctx) : ctx_(ctx) { scopes_.emplace_back(); }

  void SetGlobal(const std::string& name, Value value) { scopes_[0][name] = std::move(value); }

  absl::Status Run(const Body& body, std::string* out) {
    return ExecBody(body, Output{out, ctx_.limits().max_output_bytes});
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = absl::flat_hash_map<std::string, Value>;

  // Prefixes a runtime error with its line, unless it is the template's own raise_exception.
  static absl::Status Annotate(const absl::Status& status, int line) {
    if (status.ok() || status.GetPayload(kRaisedByTemplatePayload).has_value()) return status;
    return absl::InvalidArgumentError(
        absl::StrCat("chat template error, line ", line, ": ", status.message()));
  }

  absl::Status Write(std::string_view s, const Output& out) {
    if (out.text->size() + s.size() > out.limit) return OutputTooLarge(out);
    out.text->append(s);
    return absl::OkStatus();
  }

  absl::Status OutputTooLarge(const Output& out) const {
    return absl::InvalidArgumentError(
        absl::StrCat("rendered text exceeds the limit of ", out.limit, " bytes"));
  }

  absl::Status ExecBody(const Body& body, const Output& out) {
    for (const auto& stmt : body) {
      RETURN_IF_ERROR(Exec(*stmt, out));
      if (flow_ != Flow::kNormal) break;
    }
    return absl::OkStatus();
  }

  absl::Status Exec(const Stmt& stmt, const Output& out) {
    RETURN_IF_ERROR(Annotate(ctx_.ChargeSteps(1), stmt.line));
    switch (stmt.kind) {
      case StmtKind::kText:
        return Annotate(Write(stmt.text, out), stmt.line);
      case StmtKind::kOutput: {
        absl::StatusOr<Value> v =
            stmt.expr->constant ? EvalFolded(*stmt.expr, /*output=*/true) : Eval(*stmt.expr);
        if (!v.ok()) return Annotate(v.status(), stmt.line);
        return Annotate(AppendPyStr(*v, out.limit, out.text), stmt.line);
      }
      case StmtKind::kIf:
        for (const IfBranch& branch : stmt.branches) {
          absl::StatusOr<Value> cond = Eval(*branch.condition);
          if (!cond.ok()) return Annotate(cond.status(), branch.condition->line);
          if (cond->Truthy()) return ExecBody(branch.body, out);
        }
        return ExecBody(stmt.else_body, out);
      case StmtKind::kFor:
        return ExecFor(stmt, out);
      case StmtKind::kSet: {
        absl::StatusOr<Value> v = Eval(*stmt.expr);
        if (!v.ok()) return Annotate(v.status(), stmt.line);
        return Annotate(Assign(stmt, *v), stmt.line);
      }
      case StmtKind::kSetBlock:
        return ExecSetBlock(stmt, out);
      case StmtKind::kBreak:
        flow_ = Flow::kBreak;
        return absl::OkStatus();
      case StmtKind::kContinue:
        flow_ = Flow::kContinue;
        return absl::OkStatus();
      case StmtKind::kGeneration: {
        // Rendered by a Jinja2 call block, whose assignments stay inside it.
        scopes_.emplace_back();
        absl::Status status = ExecBody(stmt.body, out);
        scopes_.pop_back();
        return status;
      }
    }
    return absl::OkStatus();
  }

  absl::Status ExecSetBlock(const Stmt& stmt, const Output& out) {
    std::string captured;
    RETURN_IF_ERROR(ExecBody(stmt.body, Output{&captured, ctx_.limits().max_string_bytes}));
    absl::StatusOr<Value> v = ctx_.MakeString(std::move(captured));
    if (v.ok() && stmt.expr) {
      block_value_ = *v;
      v = Eval(*stmt.expr);
    }
    if (!v.ok()) return Annotate(v.status(), stmt.line);
    return Annotate(Assign(stmt, *v), stmt.line);
  }

  // Binds `value` to the names of a for loop or {% set %}, unpacking it for several names.
  absl::Status Bind(const std::vector<std::string>& names, const Value& value) {
    if (names.size() == 1) {
      scopes_.back()[names[0]] = value;
      return absl::OkStatus();
    }
    if (value.is_undefined()) return UndefinedError(value);
    if (value.kind() != ValueKind::kList && !value.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot unpack non-iterable ", value.TypeName(), " object"));
    }
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx_, value));
    if (items.size() != names.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(items.size() > names.size() ? "too many" : "not enough",
                       " values to unpack (expected ", names.size(), ", got ", items.size(), ")"));
    }
    for (size_t i = 0; i < names.size(); ++i) scopes_.back()[names[i]] = items[i];
    return absl::OkStatus();
  }

  absl::Status Assign(const Stmt& stmt, const Value& value) {
    if (stmt.attribute.empty()) return Bind(stmt.targets, value);
    Value ns = Lookup(stmt.targets[0]);
    if (ns.kind() != ValueKind::kNamespace) {
      return absl::InvalidArgumentError("cannot assign attribute on non-namespace object");
    }
    ns.AsDict()->Set(Value::String(stmt.attribute), value);
    return ctx_.ChargeSteps(1);
  }

  absl::Status ExecFor(const Stmt& stmt, const Output& out) {
    absl::StatusOr<Value> iterable = Eval(*stmt.expr);
    if (!iterable.ok()) return Annotate(iterable.status(), stmt.line);
    absl::StatusOr<std::vector<Value>> items = Iterate(ctx_, *iterable);
    if (!items.ok()) return Annotate(items.status(), stmt.line);
    if (stmt.condition) {
      std::vector<Value> kept;
      for (Value& item : *items) {
        scopes_.emplace_back();
        absl::Status status = Bind(stmt.targets, item);
        absl::StatusOr<Value> keep = status.ok() ? Eval(*stmt.condition) : status;
        scopes_.pop_back();
        if (!keep.ok()) return Annotate(keep.status(), stmt.line);
        if (keep->Truthy()) kept.push_back(std::move(item));
      }
      *items = std::move(kept);
    }
    LoopObject* loop = ctx_.heap().NewLoop();
    loop->items = ctx_.heap().NewList();
    loop->items->items = std::move(*items);
    const size_t n = loop->items->items.size();
    // Jinja2 runs the else block unless an iteration ran its body to the end: one left by break
    // or continue does not count.
    bool completed_an_iteration = false;
    for (size_t i = 0; i < n; ++i) {
      RETURN_IF_ERROR(Annotate(ctx_.ChargeSteps(1), stmt.line));
      loop->index0 = static_cast<int64_t>(i);
      scopes_.emplace_back();
      absl::Status status = Bind(stmt.targets, loop->items->items[i]);
      if (status.ok()) {
        scopes_.back()["loop"] = Value::Loop(loop);
        status = ExecBody(stmt.body, out);
      } else {
        status = Annotate(status, stmt.line);
      }
      scopes_.pop_back();
      RETURN_IF_ERROR(status);
      const Flow flow = flow_;
      flow_ = Flow::kNormal;
      if (flow == Flow::kNormal) completed_an_iteration = true;
      if (flow == Flow::kBreak) break;
    }
    if (completed_an_iteration || stmt.else_body.empty()) return absl::OkStatus();
    scopes_.emplace_back();  // the else block's assignments stay inside it, too
    absl::Status status = ExecBody(stmt.else_body, out);
    scopes_.pop_back();
    return status;
  }

  Value Lookup(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    if (FindGlobal(name) != nullptr) {
      auto [it, inserted] = builtins_.try_emplace(name);
      if (inserted) it->second = Value::Callable(ctx_.heap().NewCallable(name, Value()));
      return it->second;
    }
    return Value::Undefined(absl::StrCat("'", name, "' is undefined"));
  }

  absl::StatusOr<CallArgs> EvalArgs(const Expr& e) {
    CallArgs args;
    const size_t positional = e.num_positional();
    for (size_t i = 1; i < e.children.size(); ++i) {
      ASSIGN_OR_RETURN(Value v, Eval(*e.children[i]));
      if (i <= positional) {
        args.positional.push_back(std::move(v));
      } else {
        args.keywords.emplace_back(e.keywords[i - 1 - positional], std::move(v));
      }
    }
    return args;
  }

  absl::StatusOr<Value> CallValue(const Value& fn, const CallArgs& args) {
    if (fn.is_undefined()) return UndefinedError(fn);
    if (fn.kind() != ValueKind::kCallable) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", fn.TypeName(), "' object is not callable"));
    }
    const CallableObject& callable = *fn.AsCallable();
    if (callable.self.is_undefined()) {
      GlobalFn global = FindGlobal(callable.name);
      if (global != nullptr) return global(ctx_, args);
    } else {
      MethodFn method = FindMethod(callable.self, callable.name);
      if (method != nullptr) return method(ctx_, callable.self, args);
    }
    return absl::InvalidArgumentError(absl::StrCat("'", callable.name, "' is not callable"));
  }

  absl::StatusOr<Value> EvalCall(const Expr& e) {
    const Expr& callee = *e.children[0];
    if (callee.kind == ExprKind::kGetAttr) {
      // obj.method(...): call the method without materializing a bound callable.
      ASSIGN_OR_RETURN(Value obj, Eval(*callee.children[0]));
      if (obj.is_undefined()) return UndefinedError(obj);
      if (MethodFn method = FindMethod(obj, callee.name); method != nullptr) {
        ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
        return method(ctx_, obj, args);
      }
      ASSIGN_OR_RETURN(Value fn, GetAttr(ctx_, obj, callee.name));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
      return CallValue(fn, args);
    }
    ASSIGN_OR_RETURN(Value fn, Eval(callee));
    ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
    return CallValue(fn, args);
  }

  absl::StatusOr<Value> EvalCompare(const Expr& e) {
    ASSIGN_OR_RETURN(Value left, Eval(*e.children[0]));
    for (size_t i = 0; i < e.compare_ops.size(); ++i) {
      ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1]));
      ASSIGN_OR_RETURN(bool holds, ApplyCompare(e.compare_ops[i], left, right, ctx_));
      if (!holds) return Value::Bool(false);
      left = std::move(right);
    }
    return Value::Bool(true);
  }

  absl::StatusOr<Value> EvalDict(const Expr& e) {
    Value dict = ctx_.MakeDict();
    for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
      ASSIGN_OR_RETURN(Value key, Eval(*e.children[i]));
      RETURN_IF_ERROR(ValidateKey(key));
      ASSIGN_OR_RETURN(Value value, Eval(*e.children[i + 1]));
      RETURN_IF_ERROR(ctx_.ChargeSteps(1));
      dict.AsDict()->Set(std::move(key), std::move(value));
    }
    return dict;
  }

  // Jinja2 folds constant subexpressions at compile time, evaluating them with its forgiving
  // getitem; the one observable effect is on slices of values of the wrong type (see
  // GetSlice). A constant subtree evaluated outside folding mode is a root of folding: it is
  // evaluated leniently, and the result kept if Jinja2 would have kept it (a value with a
  // "safe repr", or anything a {{ }} prints directly); otherwise, or if folding meets a name or
  // a call (NotConstant), it is evaluated again strictly. Folding never nests, so each
  // constant subtree is evaluated at most twice.
  absl::StatusOr<Value> EvalFolded(const Expr& e, bool output) {
    folding_ = true;
    absl::StatusOr<Value> v = EvalNode(e);
    folding_ = false;
    if (v.ok() && (output || HasSafeRepr(*v, 0))) return v;
    return EvalNode(e);
  }

  static absl::Status NotConstant() { return absl::UnavailableError("not a constant"); }

  // Jinja2's has_safe_repr: whether a folded value may become a compile-time constant.
  static bool HasSafeRepr(const Value& v, int depth) {
    if (depth > kMaxFormatDepth) return false;
    switch (v.kind()) {
      case ValueKind::kNone:
      case ValueKind::kBool:
      case ValueKind::kInt:
      case ValueKind::kFloat:
      case ValueKind::kString:
        return true;
      case ValueKind::kList:
        if (!v.is_sequence()) return false;
        for (const Value& item : v.AsList()->items) {
          if (!HasSafeRepr(item, depth + 1)) return false;
        }
        return true;
      case ValueKind::kDict:
        for (const auto& [key, value] : v.AsDict()->entries) {
          if (!HasSafeRepr(key, depth + 1) || !HasSafeRepr(value, depth + 1)) return false;
        }
        return true;
      default:
        return false;
    }
  }

  absl::StatusOr<Value> Eval(const Expr& e) {
    if (e.constant && !folding_ && e.kind != ExprKind::kLiteral) return EvalFolded(e, false);
    return EvalNode(e);
  }

  absl::StatusOr<Value> EvalNode(const Expr& e) {
    RETURN_IF_ERROR(ctx_.ChargeSteps(1));
    if (folding_ && (e.kind == ExprKind::kName || e.kind == ExprKind::kCall)) {
      return NotConstant();
    }
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.literal;
      case ExprKind::kName:
        return Lookup(e.name);
      case ExprKind::kList:
      case ExprKind::kTuple: {
        std::vector<Value> items;
        for (const auto& child : e.children) {
          ASSIGN_OR_RETURN(Value v, Eval(*child));
          items.push_back(std::move(v));
        }
        return ctx_.MakeList(std::move(items),
                             e.kind == ExprKind::kTuple ? SeqKind::kTuple : SeqKind::kList);
      }
      case ExprKind::kDict:
        return EvalDict(e);
      case ExprKind::kGetAttr: {
        ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
        return GetAttr(ctx_, obj, e.name);
      }
      case ExprKind::kGetItem: {
        ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
        ASSIGN_OR_RETURN(Value key, Eval(*e.children[1]));
        return GetItem(ctx_, obj, key);
      }
      case ExprKind::kSlice: {
        ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
        std::optional<Value> bounds[3];
        for (int i = 0; i < 3; ++i) {
          if (e.children[i + 1]) {
            ASSIGN_OR_RETURN(bounds[i], Eval(*e.children[i + 1]));
          }
        }
        return GetSlice(ctx_, obj, bounds[0], bounds[1], bounds[2], folding_);
      }
      case ExprKind::kCall:
        return EvalCall(e);
      case ExprKind::kFilter: {
        Value operand = block_value_;
        if (e.children[0]) {
          ASSIGN_OR_RETURN(operand, Eval(*e.children[0]));
        }
        FilterFn filter = FindFilter(e.name);
        if (filter == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat("no filter named '", e.name, "'"));
        }
        ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
        return filter(ctx_, operand, args);
      }
      case ExprKind::kTest: {
        ASSIGN_OR_RETURN(Value operand, Eval(*e.children[0]));
        TestFn test = FindTest(e.name);
        if (test == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat("no test named '", e.name, "'"));
        }
        ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
        ASSIGN_OR_RETURN(bool result, test(ctx_, operand, args));
        return Value::Bool(result != e.negated);
      }
      case ExprKind::kNot: {
        ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
        return Value::Bool(!v.Truthy());
      }
      case ExprKind::kNeg:
      case ExprKind::kPos: {
        ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
        return ApplyUnary(e.kind == ExprKind::kNeg, v);
      }
      case ExprKind::kBinary: {
        ASSIGN_OR_RETURN(Value a, Eval(*e.children[0]));
        ASSIGN_OR_RETURN(Value b, Eval(*e.children[1]));
        return ApplyBinary(e.binary_op, a, b, ctx_);
      }
      case ExprKind::kAnd:
      case ExprKind::kOr: {
        ASSIGN_OR_RETURN(Value a, Eval(*e.children[0]));
        if (a.Truthy() == (e.kind == ExprKind::kOr)) return a;
        return Eval(*e.children[1]);
      }
      case ExprKind::kCompare:
        return EvalCompare(e);
      case ExprKind::kCondExpr: {
        ASSIGN_OR_RETURN(Value cond, Eval(*e.children[1]));
        if (cond.Truthy()) return Eval(*e.children[0]);
        if (e.children[2]) return Eval(*e.children[2]);
        if (folding_) return NotConstant();
        return Value::Undefined(absl::StrCat("the inline if-expression on line ", e.line,
                                             " evaluated to false and no else section was "
                                             "defined."));
      }
      case ExprKind::kConcat: {
        std::string s;
        for (const auto& child : e.children) {
          ASSIGN_OR_RETURN(Value v, Eval(*child));
          RETURN_IF_ERROR(AppendPyStr(v, ctx_.limits().max_string_bytes, &s));
        }
        return ctx_.MakeString(std::move(s));
      }
    }
    return Value();
  }

  RenderContext& ctx_;
  std::vector<Scope> scopes_;
  Scope builtins_;        // callables for the global functions, made on first use
  Value block_value_;     // the text a {% set x | filter %} block captured
  bool folding_ = false;  // evaluating a constant subtree as Jinja2's constant folding would
  Flow flow_ = Flow::kNormal;
};

}  // namespace

absl::Status RenderBody(const Body& body, const std::vector<std::pair<std::string, Value>>& globals,
                        RenderContext& ctx, std::string* out) {
  Interpreter interpreter(ctx);
  for (const auto& [name, value] : globals) interpreter.SetGlobal(name, value);
  return interpreter.Run(body, out);
}

}  // namespace pagellm::chat_template
