// Argument binding of macro calls, as Jinja2's runtime.Macro.__call__ does it: positional
// arguments fill the parameters in order, keywords fill the rest; a macro whose body reads
// `varargs` / `kwargs` / `caller` collects the extra positional arguments, the extra keywords
// and the `caller=` keyword (a {% call %} block's body), and any other macro rejects them.
//
// Thread-safe: a pure function (values are made in the caller's RenderContext).
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_MACRO_ARGS_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_MACRO_ARGS_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chat_template/ast.h"
#include "common/chat_template/builtins.h"
#include "common/chat_template/render_context.h"
#include "common/chat_template/value.h"

namespace pagellm::chat_template {

struct MacroArgs {
  // One per macro.params: the argument given, or unset (the default applies, or the parameter
  // is undefined when it has none).
  std::vector<std::optional<Value>> params;
  // Set when the macro reads the name: caller (undefined when no caller was passed), varargs
  // (a tuple), kwargs (a dict).
  std::optional<Value> caller;
  std::optional<Value> varargs;
  std::optional<Value> kwargs;
};

// Binds `args` to `macro` (a kMacro or kCallBlock statement). InvalidArgument with Jinja2's
// TypeError message for too many positional arguments or an unexpected keyword.
absl::StatusOr<MacroArgs> BindMacroArgs(RenderContext& ctx, const Stmt& macro,
                                        const CallArgs& args);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_MACRO_ARGS_H_
