// Design: a tree-walking interpreter. Scopes are a stack of shared maps: scopes_[0] holds the
// template variables and top-level {% set %}s, and every for-loop iteration (and with, filter
// and call block) pushes a fresh map that is popped when it ends (Jinja2's loop scoping,
// including the reset of loop-local assignments on each iteration). Name lookup goes from the
// innermost scope out, then to the builtin globals. A macro (or a call block's caller, or a
// recursive loop) keeps the stack it was defined in, its closure; calling it swaps that stack
// in, plus a scope for its parameters, and swaps the caller's back afterwards, so macros see
// their definition's variables (as they are at call time, like Python closures), never their
// caller's. Break and continue set `flow_`, which every statement list checks after each
// statement, up to the loop that consumes it.
//
// Recursion: statements and expressions being evaluated at once (depth_) are bounded by
// RenderLimits::max_depth, which bounds the C++ stack even through macro calls and recursive
// loops; work by RenderLimits through the RenderContext; output size by Output::limit.
#include "common/chat_template/interpreter.h"

#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/chat_template/access.h"
#include "common/chat_template/builtins.h"
#include "common/chat_template/macro_args.h"
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
  explicit Interpreter(RenderContext& ctx) : ctx_(ctx) { PushScope(); }

  void SetGlobal(const std::string& name, Value value) { (*scopes_[0])[name] = std::move(value); }

  absl::Status Run(const Body& body, std::string* out) {
    return ExecBody(body, Output{out, ctx_.limits().max_output_bytes});
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  void PushScope() { scopes_.push_back(std::make_shared<Scope>()); }
  void PopScope() { scopes_.pop_back(); }
  Scope& Current() { return *scopes_.back(); }

  // Counts `n` levels of nesting (a statement or expression being evaluated is one level, a
  // call kCallLevels: its frames take about as much stack); fails past RenderLimits::max_depth.
  // LeaveLevel(n) undoes a successful EnterLevel(n).
  absl::Status EnterLevel(int n = 1) {
    if (depth_ + n > ctx_.limits().max_depth) {
      return absl::InvalidArgumentError(
          absl::StrCat("template nested too deeply: over ", ctx_.limits().max_depth,
                       " levels of statements, expressions, macro calls and recursive loops"));
    }
    depth_ += n;
    return absl::OkStatus();
  }
  void LeaveLevel(int n = 1) { depth_ -= n; }
  static constexpr int kCallLevels = 5;

  // Runs `body` with the scopes `closure`, capturing its output into a string value: a macro
  // call or a recursive loop call.
  template <typename Fn>
  absl::StatusOr<Value> RunClosure(const ScopeChain& closure, Fn&& body) {
    RETURN_IF_ERROR(EnterLevel(kCallLevels));
    absl::StatusOr<Value> result = RunClosureAtLevel(closure, body);
    LeaveLevel(kCallLevels);
    return result;
  }

  template <typename Fn>
  absl::StatusOr<Value> RunClosureAtLevel(const ScopeChain& closure, Fn& body) {
    RETURN_IF_ERROR(ctx_.ChargeSteps(closure.size() + 1));
    ScopeChain saved = std::move(scopes_);
    scopes_ = closure;
    const Flow saved_flow = flow_;
    flow_ = Flow::kNormal;
    std::string text;
    absl::Status status = body(Output{&text, ctx_.limits().max_string_bytes});
    scopes_ = std::move(saved);
    flow_ = saved_flow;
    RETURN_IF_ERROR(status);
    return ctx_.MakeString(std::move(text));
  }

  // Prefixes a runtime error with its line, unless it is the template's own raise_exception
  // or has its line already (an error inside a macro called on another line).
  static absl::Status Annotate(const absl::Status& status, int line) {
    if (status.ok() || status.GetPayload(kRaisedByTemplatePayload).has_value() ||
        status.GetPayload(kAnnotatedPayload).has_value()) {
      return status;
    }
    absl::Status annotated = absl::InvalidArgumentError(
        absl::StrCat("chat template error, line ", line, ": ", status.message()));
    annotated.SetPayload(kAnnotatedPayload, absl::Cord("1"));
    return annotated;
  }

 public:
  static constexpr char kAnnotatedPayload[] = "pagellm.chat_template/annotated";

 private:
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
    RETURN_IF_ERROR(Annotate(EnterLevel(), stmt.line));
    absl::Status status = ExecStmt(stmt, out);
    LeaveLevel();
    return status;
  }

  absl::Status ExecStmt(const Stmt& stmt, const Output& out) {
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
        PushScope();
        absl::Status status = ExecBody(stmt.body, out);
        PopScope();
        return status;
      }
      case StmtKind::kMacro: {
        RETURN_IF_ERROR(Annotate(ctx_.ChargeSteps(scopes_.size()), stmt.line));
        Current()[stmt.name] = NewMacro(stmt);
        return absl::OkStatus();
      }
      case StmtKind::kCallBlock:
        return ExecCallBlock(stmt, out);
      case StmtKind::kFilterBlock:
        return ExecFilterBlock(stmt, out);
      case StmtKind::kWith:
        return ExecWith(stmt, out);
    }
    return absl::OkStatus();
  }

  Value NewMacro(const Stmt& stmt) {
    CallableObject* fn = ctx_.heap().NewCallable(stmt.name, Value());
    fn->kind = CallableKind::kMacro;
    fn->macro = &stmt;
    fn->closure = scopes_;
    return Value::Callable(fn);
  }

  absl::StatusOr<Value> CallMacro(const CallableObject& fn, const CallArgs& args) {
    const Stmt& macro = *fn.macro;
    ASSIGN_OR_RETURN(MacroArgs bound, BindMacroArgs(ctx_, macro, args));
    return RunClosure(fn.closure, [&](const Output& out) -> absl::Status {
      PushScope();
      const size_t first_default = macro.params.size() - macro.defaults.size();
      for (size_t i = 0; i < macro.params.size(); ++i) {
        Value v;
        if (bound.params[i]) {
          v = *bound.params[i];
        } else if (i >= first_default) {
          // Defaults are evaluated at call time, in the macro's scope (seeing earlier
          // parameters).
          const Expr& value = *macro.defaults[i - first_default];
          absl::StatusOr<Value> d = Eval(value);
          if (!d.ok()) return Annotate(d.status(), value.line);
          v = *d;
        } else {
          v = Value::Undefined(
              absl::StrCat("parameter ", PyStringRepr(macro.params[i]), " was not provided"));
        }
        Current()[macro.params[i]] = std::move(v);
      }
      if (bound.caller) Current()["caller"] = *bound.caller;
      if (bound.varargs) Current()["varargs"] = *bound.varargs;
      if (bound.kwargs) Current()["kwargs"] = *bound.kwargs;
      return ExecBody(macro.body, out);
    });
  }

  absl::Status ExecCallBlock(const Stmt& stmt, const Output& out) {
    RETURN_IF_ERROR(Annotate(ctx_.ChargeSteps(scopes_.size()), stmt.line));
    const Value caller = NewMacro(stmt);
    absl::StatusOr<Value> v = EvalCall(*stmt.expr, &caller);
    if (!v.ok()) return Annotate(v.status(), stmt.line);
    return Annotate(AppendPyStr(*v, out.limit, out.text), stmt.line);
  }

  absl::Status ExecFilterBlock(const Stmt& stmt, const Output& out) {
    PushScope();
    std::string captured;
    absl::Status status = ExecBody(stmt.body, Output{&captured, ctx_.limits().max_string_bytes});
    Value result;
    // A break or continue leaves the block (as Python's would): its text is dropped.
    if (status.ok() && flow_ == Flow::kNormal) {
      absl::StatusOr<Value> v = ctx_.MakeString(std::move(captured));
      if (v.ok()) {
        block_value_ = *v;
        v = Eval(*stmt.expr);  // in the block's scope, as Jinja2 does
      }
      if (v.ok()) {
        result = *v;
      } else {
        status = Annotate(v.status(), stmt.line);
      }
    }
    PopScope();
    if (!status.ok() || flow_ != Flow::kNormal) return status;
    return Annotate(AppendPyStr(result, out.limit, out.text), stmt.line);
  }

  absl::Status ExecWith(const Stmt& stmt, const Output& out) {
    // The values are evaluated in the enclosing scope, before any target is bound.
    std::vector<Value> values;
    for (const auto& value : stmt.with_values) {
      absl::StatusOr<Value> v = Eval(*value);
      if (!v.ok()) return Annotate(v.status(), value->line);
      values.push_back(std::move(*v));
    }
    PushScope();
    absl::Status status;
    for (size_t i = 0; i < values.size() && status.ok(); ++i) {
      status = Annotate(Bind(stmt.with_targets[i], values[i]), stmt.line);
    }
    if (status.ok()) status = ExecBody(stmt.body, out);
    PopScope();
    return status;
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
      Current()[names[0]] = value;
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
    for (size_t i = 0; i < names.size(); ++i) Current()[names[i]] = items[i];
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
    return RunLoop(stmt, *iterable, /*depth0=*/0, scopes_, out);
  }

  // Runs for loop `stmt` over `iterable`: the whole loop, or a recursive loop(items) call
  // (`depth0` > 0). `closure` is the scope stack around the for statement, kept by a
  // recursive loop for its loop(items) calls.
  absl::Status RunLoop(const Stmt& stmt, const Value& iterable, int depth0,
                       const ScopeChain& closure, const Output& out) {
    absl::StatusOr<std::vector<Value>> items = Iterate(ctx_, iterable);
    if (!items.ok()) return Annotate(items.status(), stmt.line);
    if (stmt.condition) {
      std::vector<Value> kept;
      for (Value& item : *items) {
        PushScope();
        absl::Status status = Bind(stmt.targets, item);
        absl::StatusOr<Value> keep = status.ok() ? Eval(*stmt.condition) : status;
        PopScope();
        if (!keep.ok()) return Annotate(keep.status(), stmt.line);
        if (keep->Truthy()) kept.push_back(std::move(item));
      }
      *items = std::move(kept);
    }
    LoopObject* loop = ctx_.heap().NewLoop();
    loop->items = ctx_.heap().NewList();
    loop->items->items = std::move(*items);
    loop->depth0 = depth0;
    if (stmt.recursive) {
      RETURN_IF_ERROR(Annotate(ctx_.ChargeSteps(closure.size()), stmt.line));
      loop->recursive = &stmt;
      loop->closure = closure;
    }
    const size_t n = loop->items->items.size();
    // Jinja2 runs the else block unless an iteration ran its body to the end: one left by break
    // or continue does not count.
    bool completed_an_iteration = false;
    for (size_t i = 0; i < n; ++i) {
      RETURN_IF_ERROR(Annotate(ctx_.ChargeSteps(1), stmt.line));
      loop->index0 = static_cast<int64_t>(i);
      PushScope();
      absl::Status status = Bind(stmt.targets, loop->items->items[i]);
      if (status.ok()) {
        Current()["loop"] = Value::Loop(loop);
        status = ExecBody(stmt.body, out);
      } else {
        status = Annotate(status, stmt.line);
      }
      PopScope();
      RETURN_IF_ERROR(status);
      const Flow flow = flow_;
      flow_ = Flow::kNormal;
      if (flow == Flow::kNormal) completed_an_iteration = true;
      if (flow == Flow::kBreak) break;
    }
    if (completed_an_iteration || stmt.else_body.empty()) return absl::OkStatus();
    PushScope();  // the else block's assignments stay inside it, too
    absl::Status status = ExecBody(stmt.else_body, out);
    PopScope();
    return status;
  }

  // loop(items) in the body of a recursive loop: renders the loop over `items`, one level
  // deeper, and returns the text.
  absl::StatusOr<Value> CallLoop(const LoopObject& loop, const CallArgs& args) {
    if (loop.recursive == nullptr) {
      return absl::InvalidArgumentError(
          "The loop must have the 'recursive' marker to be called recursively.");
    }
    ASSIGN_OR_RETURN(auto a, BindArgs("loop", args, {"iterable"}, 1));
    const Stmt& stmt = *loop.recursive;
    const ScopeChain closure = loop.closure;  // `loop` may not outlive the call's scopes
    const int depth0 = loop.depth0 + 1;
    return RunClosure(
        closure, [&](const Output& out) { return RunLoop(stmt, *a[0], depth0, closure, out); });
  }

  Value Lookup(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = (*it)->find(name);
      if (found != (*it)->end()) return found->second;
    }
    if (FindGlobal(name) != nullptr) {
      auto [it, inserted] = builtins_.try_emplace(name);
      if (inserted) it->second = Value::Callable(ctx_.heap().NewCallable(name, Value()));
      return it->second;
    }
    return Value::Undefined(absl::StrCat("'", name, "' is undefined"));
  }

  // The arguments of call, filter or test `e`; `caller`, when set, is an extra keyword
  // caller= (a {% call %} block's body).
  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, const Value* caller = nullptr) {
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
    if (caller != nullptr) args.keywords.emplace_back("caller", *caller);
    return args;
  }

  absl::StatusOr<Value> CallValue(const Value& fn, const CallArgs& args) {
    if (fn.is_undefined()) return UndefinedError(fn);
    if (fn.kind() == ValueKind::kLoop) return CallLoop(*fn.AsLoop(), args);
    if (fn.kind() != ValueKind::kCallable || fn.AsCallable()->kind == CallableKind::kCycler) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", fn.TypeName(), "' object is not callable"));
    }
    CallableObject& callable = *fn.AsCallable();
    if (callable.kind == CallableKind::kMacro) return CallMacro(callable, args);
    if (callable.kind == CallableKind::kJoiner) {
      RETURN_IF_ERROR(BindArgs("Joiner.__call__", args, {}, 0).status());
      if (!callable.used) {
        callable.used = true;
        return Value::String("");
      }
      return callable.self;
    }
    if (callable.self.is_undefined()) {
      GlobalFn global = FindGlobal(callable.name);
      if (global != nullptr) return global(ctx_, args);
    } else {
      MethodFn method = FindMethod(callable.self, callable.name);
      if (method != nullptr) return method(ctx_, callable.self, args);
    }
    return absl::InvalidArgumentError(absl::StrCat("'", callable.name, "' is not callable"));
  }

  // Call `e`; `caller`: see EvalArgs.
  absl::StatusOr<Value> EvalCall(const Expr& e, const Value* caller = nullptr) {
    const Expr& callee = *e.children[0];
    if (callee.kind == ExprKind::kGetAttr) {
      // obj.method(...): call the method without materializing a bound callable.
      ASSIGN_OR_RETURN(Value obj, Eval(*callee.children[0]));
      if (obj.is_undefined()) return UndefinedError(obj);
      if (MethodFn method = FindMethod(obj, callee.name); method != nullptr) {
        ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, caller));
        return method(ctx_, obj, args);
      }
      ASSIGN_OR_RETURN(Value fn, GetAttr(ctx_, obj, callee.name));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, caller));
      return CallValue(fn, args);
    }
    ASSIGN_OR_RETURN(Value fn, Eval(callee));
    ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, caller));
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
    RETURN_IF_ERROR(EnterLevel());
    absl::StatusOr<Value> v = EvalNodeAtLevel(e);
    LeaveLevel();
    return v;
  }

  absl::StatusOr<Value> EvalNodeAtLevel(const Expr& e) {
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
  ScopeChain scopes_;
  Scope builtins_;        // callables for the global functions, made on first use
  Value block_value_;     // the text a {% set x | filter %} block captured
  bool folding_ = false;  // evaluating a constant subtree as Jinja2's constant folding would
  Flow flow_ = Flow::kNormal;
  int depth_ = 0;  // statements and expressions being evaluated (nested)
};

}  // namespace

absl::Status RenderBody(const Body& body, const std::vector<std::pair<std::string, Value>>& globals,
                        RenderContext& ctx, std::string* out) {
  Interpreter interpreter(ctx);
  for (const auto& [name, value] : globals) interpreter.SetGlobal(name, value);
  absl::Status status = interpreter.Run(body, out);
  status.ErasePayload(Interpreter::kAnnotatedPayload);
  return status;
}

}  // namespace pagellm::chat_template
