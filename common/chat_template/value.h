// Values of the chat-template interpreter: the Python objects a Jinja2 template sees, reduced to
// what chat templates use. Scalars (undefined, none, bool, int, float, string) are held inline;
// strings are immutable and shared, so copying a Value never copies text. Containers (list and
// tuple, dict, namespace, loop, callable) live in a Heap owned by one render and are referenced
// by raw pointer: they die together when the render ends, so a template that builds cycles
// (`{% set ns.me = ns %}`) or deep chains cannot leak or overflow the stack on destruction.
//
// Python semantics kept: bool is an int (True + 1 == 2, True == 1), dicts keep insertion order
// and compare equal regardless of order, tuples are never equal to lists. Ints are 64-bit where
// Python's are unbounded; arithmetic that overflows fails (see operators.h).
//
// Thread-safety: a Value and its Heap belong to one render on one thread. Values of kind
// kUndefined..kString own no heap objects and may be shared read-only across threads (the parsed
// template's literals are).
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_VALUE_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_VALUE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace pagellm::chat_template {

enum class ValueKind {
  kUndefined,  // a missing variable, attribute or item: renders as "", is falsy, fails when used
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // list, tuple, iterator or dict view (ListObject::seq)
  kDict,
  kNamespace,  // the mutable result of namespace(...); attributes set with {% set ns.x = .. %}
  kLoop,       // the `loop` variable of a for loop
  kCallable,   // a global function or a bound method
};

struct ListObject;
struct DictObject;
struct LoopObject;
struct CallableObject;
struct Stmt;  // ast.h

class Value {
 public:
  // Undefined. `hint` (may be empty) is the message of the error raised when it is used, e.g.
  // "'foo' is undefined".
  Value() = default;
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value List(ListObject* list);  // list or tuple
  static Value Dict(DictObject* dict);
  static Value Namespace(DictObject* ns);
  static Value Loop(LoopObject* loop);
  static Value Callable(CallableObject* fn);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_none() const { return kind_ == ValueKind::kNone; }
  bool is_string() const { return kind_ == ValueKind::kString; }
  // int or bool (a Python bool is an int).
  bool is_integral() const { return kind_ == ValueKind::kInt || kind_ == ValueKind::kBool; }
  // int, bool or float.
  bool is_number() const { return is_integral() || kind_ == ValueKind::kFloat; }
  bool is_tuple() const;
  // A list or tuple: indexable, sliceable, concatenable (not an iterator or a view).
  bool is_sequence() const;

  // Accessors. REQUIRES: the matching kind (AsInt: is_integral(); AsDouble: is_number();
  // AsDict: kDict or kNamespace).
  bool AsBool() const { return u_.b; }
  int64_t AsInt() const { return kind_ == ValueKind::kBool ? (u_.b ? 1 : 0) : u_.i; }
  double AsDouble() const;
  const std::string& AsString() const;  // also the hint of an undefined value
  ListObject* AsList() const { return u_.list; }
  DictObject* AsDict() const { return u_.dict; }
  LoopObject* AsLoop() const { return u_.loop; }
  CallableObject* AsCallable() const { return u_.fn; }

  // Python truthiness: undefined, none, False, 0, 0.0, "", [], {} are false.
  bool Truthy() const;

  // Python's type name for error messages ("str", "int", "list", "Undefined", ...).
  const char* TypeName() const;

 private:
  ValueKind kind_ = ValueKind::kUndefined;
  union {
    bool b;
    int64_t i;
    double f;
    ListObject* list;
    DictObject* dict;
    LoopObject* loop;
    CallableObject* fn;
  } u_{};
  std::shared_ptr<const std::string> str_;  // kString: the text; kUndefined: the hint
};

// The kinds of ListObject. kIterator is a single-use iterator, what Jinja2's map, select,
// selectattr, items and reverse filters return: always true, no len(), not indexable, and
// consumed by iteration (`consumed` counts the items already taken). kView is a dict view
// (dict.items(), keys(), values()): sized and re-iterable, but not indexable.
enum class SeqKind { kList, kTuple, kIterator, kView };

// ListObject::type_name of groupby's (grouper, list) tuples, which have those attributes.
inline constexpr char kGroupTupleType[] = "_GroupTuple";

struct ListObject {
  std::vector<Value> items;
  SeqKind seq = SeqKind::kList;
  const char* type_name = "list";  // Python's type: "tuple", "generator", "dict_items", ...
  size_t consumed = 0;             // kIterator only
};

// An insertion-ordered mapping (dict or namespace), hashed: keys are restricted to str, int,
// float, bool and none (see operators.h: ValidateKey), indexed by a canonical form under which
// Python's equal keys (1, 1.0, True) coincide.
struct DictObject {
  std::vector<std::pair<Value, Value>> entries;
  absl::flat_hash_map<std::string, size_t> index;  // canonical key -> position in entries

  // Returns the value stored under a key equal (Python ==) to `key`, or nullptr.
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  // Inserts or replaces.
  void Set(Value key, Value value);
};

// The variables of one scope of the interpreter. Scopes are shared: a macro or a recursive loop
// keeps the scopes it was defined in (a closure), and sees later assignments to them.
using Scope = absl::flat_hash_map<std::string, Value>;
using ScopeChain = std::vector<std::shared_ptr<Scope>>;  // outermost first

// State of one for loop, updated in place as the loop advances (Python's LoopContext).
struct LoopObject {
  ListObject* items = nullptr;  // the (filtered) items iterated over
  int64_t index0 = 0;           // position of the current item
  int depth0 = 0;               // 0 for the outermost loop
  // A `recursive` loop: its statement and the scopes around it, for loop(items); null else.
  const Stmt* recursive = nullptr;
  ScopeChain closure;
  // loop.changed(): the value of its last call; unset before the first.
  std::optional<Value> last_changed;
};

// What a callable is. kBuiltin: a global function (`self` undefined) or a method bound to
// `self` ("range", "strip"). kMacro: a {% macro %} or the caller of a {% call %} block
// (`macro`, `closure`). kJoiner: joiner(sep) (`self` the separator, `used`). kCycler:
// cycler(*items) (`items`, `position`), not callable itself but with methods.
enum class CallableKind { kBuiltin, kMacro, kJoiner, kCycler };

struct CallableObject {
  std::string name;
  Value self;
  CallableKind kind = CallableKind::kBuiltin;
  const Stmt* macro = nullptr;  // kMacro: the kMacro or kCallBlock statement
  ScopeChain closure;           // kMacro: the scopes the macro was defined in
  bool used = false;            // kJoiner
  std::vector<Value> items;     // kCycler
  size_t position = 0;          // kCycler
};

// Owns the containers created during one render. Pointers stay valid until the Heap dies.
// Not thread-safe.
class Heap {
 public:
  Heap() = default;
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  ListObject* NewList() { return &lists_.emplace_back(); }
  DictObject* NewDict() { return &dicts_.emplace_back(); }
  LoopObject* NewLoop() { return &loops_.emplace_back(); }
  CallableObject* NewCallable(std::string name, Value self) {
    CallableObject& fn = callables_.emplace_back();
    fn.name = std::move(name);
    fn.self = std::move(self);
    return &fn;
  }

 private:
  std::deque<ListObject> lists_;
  std::deque<DictObject> dicts_;
  std::deque<LoopObject> loops_;
  std::deque<CallableObject> callables_;
};

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_VALUE_H_
