// ChatRenderer: turns a chat prompt into the text the model was trained on, with the model's
// chat template. The router's own narrow view of common/chat_template (ChatTemplate), so that
// the request path and its tests do not depend on how templates are implemented.
//
// Thread-safe: Render is const and keeps no mutable state; one renderer serves all threads.
#ifndef PAGELLM_ROUTER_CHAT_RENDERER_H_
#define PAGELLM_ROUTER_CHAT_RENDERER_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "pagellm/v1/generation.pb.h"

namespace pagellm {

class ChatRenderer {
 public:
  virtual ~ChatRenderer() = default;

  // Returns the rendered prompt. Any role is passed to the template, which decides (as
  // transformers does): InvalidArgument carrying the template's own message when it rejects the
  // conversation (an unknown role, roles out of order, ...), or naming the line of the template
  // that failed.
  [[nodiscard]] virtual absl::StatusOr<std::string> Render(const v1::ChatPrompt& chat) const = 0;

  // Parses the Jinja2 `source` of a model's template; `tokens` are the special tokens the
  // template may reference (bos_token, ...). InvalidArgument when the template does not parse.
  static absl::StatusOr<std::unique_ptr<ChatRenderer>> Create(std::string_view source,
                                                              v1::SpecialTokens tokens);
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_CHAT_RENDERER_H_
