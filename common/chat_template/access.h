// Jinja2's access to values: `x.name`, `x[key]`, `x[a:b:c]`, iteration and len(), with the
// sandboxed environment's rules: a missing attribute or item is an undefined value (whose hint
// names what was missing), not an error; accessing anything on an undefined value is an error;
// `x.name` prefers a method of x (dict.items, str.strip) and falls back to the item "name",
// `x["name"]` the other way round.
//
// Thread-safety: as the values (see value.h).
#ifndef PAGELLM_COMMON_CHAT_TEMPLATE_ACCESS_H_
#define PAGELLM_COMMON_CHAT_TEMPLATE_ACCESS_H_

#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/chat_template/render_context.h"
#include "common/chat_template/value.h"

namespace pagellm::chat_template {

// x.name. Methods come back as bound callables; `loop` attributes are computed.
absl::StatusOr<Value> GetAttr(RenderContext& ctx, const Value& obj, std::string_view name);
// Python's getattr(x, name) alone, as the `attr` filter reads: a dict's items are not its
// attributes (x.name falls back to x['name'], attr does not). Undefined when missing.
absl::StatusOr<Value> GetAttrOnly(RenderContext& ctx, const Value& obj, std::string_view name);

// x[key]. Negative indexes count from the end; out of range is undefined.
absl::StatusOr<Value> GetItem(RenderContext& ctx, const Value& obj, const Value& key);

// x[start:stop:step] on a list, tuple or string (unset bounds are Python's None); TypeError for
// other values, as Jinja2 slices with Python's operator directly, unless `folded`: Jinja2's
// constant folding evaluates a slice of constants (`{{ true[1:] }}`) with its forgiving
// getitem, which makes such errors undefined values.
absl::StatusOr<Value> GetSlice(RenderContext& ctx, const Value& obj,
                               const std::optional<Value>& start, const std::optional<Value>& stop,
                               const std::optional<Value>& step, bool folded = false);

// The items `for x in v` visits: list items, dict keys, string characters; none for undefined;
// an iterator's remaining items (which consumes them). TypeError for values that are not
// iterable. Counts one step per item.
absl::StatusOr<std::vector<Value>> Iterate(RenderContext& ctx, const Value& v);

// len(v): code points of a string, items of a list or dict, 0 for undefined; TypeError else.
absl::StatusOr<int64_t> Length(RenderContext& ctx, const Value& v);

}  // namespace pagellm::chat_template

#endif  // PAGELLM_COMMON_CHAT_TEMPLATE_ACCESS_H_
