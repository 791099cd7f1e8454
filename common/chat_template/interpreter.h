// Executes a parsed chat template (ast.h) with Jinja2's semantics as transformers configures it:
//   * undefined variables and missing attributes render as "" and are falsy; using one in
//     arithmetic, calling it or taking its attribute fails (jinja2.Undefined);
//   * `{% for %}` opens a scope per iteration: a {% set %} inside the loop is not visible after
//     it (namespace() objects exist to carry state out); `{% if %}` opens no scope;
//   * `loop.index/index0/revindex/revindex0/first/last/length/previtem/nextitem/cycle()`,
//     `{% for x in xs if cond %}` (loop.length counts the kept items), {% break %} and
//     {% continue %}, and `{% else %}`, which (as in Jinja2) runs unless an iteration reached the
//     end of the loop body: iterations left by break or continue do not count;
//   * {% macro %}: a callable bound where it is defined, which sees the variables of the scopes
//     around its definition (as they are when it is called) and never its caller's; arguments
//     bind as Jinja2's Macro does (macro_args.h); defaults are evaluated at each call;
//     {% call %} passes its body as `caller`; {% with %} and {% filter %} open a scope;
//     `recursive` loops render loop(items) one level deeper (loop.depth);
//   * globals range, namespace, dict, joiner, cycler, raise_exception (see builtins.h).
// Runtime errors are InvalidArgument "chat template error, line N: <Python/Jinja2 message>",
// except raise_exception's, which keep the template's message verbatim (and the payload
// kRaisedByTemplatePayload). Every statement, iteration and expression counts against
// RenderLimits::max_steps; the output against max_output_bytes; the text a macro, call block,
// filter block or recursive loop call builds against max_string_bytes; the nesting of
// statements, expressions and calls against max_depth.
//
// Thread-safety: RenderBody only reads `body`; concurrent renders of one template are safe, each
// with its own RenderContext.
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_INTERPRETER_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_INTERPRETER_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/chat_template/ast.h"
#include "common/chat_template/render_context.h"
#include "common/chat_template/value.h"

namespace pagellm::chat_template {

// Renders `body` with the template variables `globals` (made in `ctx`), appending to `out`.
// On error `out` holds a partial rendering.
absl::Status RenderBody(const Body& body, const std::vector<std::pair<std::string, Value>>& globals,
                        RenderContext& ctx, std::string* out);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_INTERPRETER_H_
