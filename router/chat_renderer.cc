// ChatRenderer over common/chat_template's ChatTemplate.
#include "router/chat_renderer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/chat_template/chat_template.h"

namespace pagellm {
namespace {

class TemplateRenderer final : public ChatRenderer {
 public:
  TemplateRenderer(std::unique_ptr<ChatTemplate> tmpl, v1::SpecialTokens tokens)
      : template_(std::move(tmpl)), tokens_(std::move(tokens)) {}

  absl::StatusOr<std::string> Render(const v1::ChatPrompt& chat) const override {
    std::vector<ChatMessage> messages;
    messages.reserve(chat.messages_size());
    for (const v1::ChatMessage& m : chat.messages()) {
      // Any role: the template decides (developer, ipython, function, ...), as in transformers.
      messages.push_back(ChatMessage{m.role(), m.content()});
    }
    RenderOptions options;
    options.add_generation_prompt =
        chat.has_add_generation_prompt() ? chat.add_generation_prompt() : true;
    options.bos_token = tokens_.bos_token();
    options.eos_token = tokens_.eos_token();
    options.unk_token = tokens_.unk_token();
    options.pad_token = tokens_.pad_token();
    options.template_kwargs_json = chat.chat_template_kwargs();
    // Errors are InvalidArgument already: exactly the template's raise_exception message for a
    // conversation it rejects, "chat template error, line N: ..." otherwise.
    return template_->Render(messages, options);
  }

 private:
  std::unique_ptr<ChatTemplate> template_;
  const v1::SpecialTokens tokens_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ChatRenderer>> ChatRenderer::Create(std::string_view source,
                                                                   v1::SpecialTokens tokens) {
  auto tmpl = ChatTemplate::Parse(source);
  if (!tmpl.ok()) return tmpl.status();
  return std::unique_ptr<ChatRenderer>(new TemplateRenderer(*std::move(tmpl), std::move(tokens)));
}

}  // namespace pagellm
