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
  TemplateRenderer(std::unique_ptr<ChatTemplate> tmpl, std::string bos, std::string eos)
      : template_(std::move(tmpl)), bos_(std::move(bos)), eos_(std::move(eos)) {}

  absl::StatusOr<std::string> Render(const v1::ChatPrompt& chat) const override {
    std::vector<ChatMessage> messages;
    messages.reserve(chat.messages_size());
    for (const v1::ChatMessage& m : chat.messages()) {
      // The roles of the OpenAI chat schema. Templates often print any role verbatim, so an
      // unknown one would silently become part of the prompt.
      if (m.role() != "system" && m.role() != "user" && m.role() != "assistant" &&
          m.role() != "tool") {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown chat role '", m.role(), "' (system, user, assistant or tool)"));
      }
      messages.push_back(ChatMessage{m.role(), m.content()});
    }
    RenderOptions options;
    options.add_generation_prompt =
        chat.has_add_generation_prompt() ? chat.add_generation_prompt() : true;
    options.bos_token = bos_;
    options.eos_token = eos_;
    // Errors are InvalidArgument already: exactly the template's raise_exception message for a
    // conversation it rejects, "chat template error, line N: ..." otherwise.
    return template_->Render(messages, options);
  }

 private:
  std::unique_ptr<ChatTemplate> template_;
  std::string bos_;
  std::string eos_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ChatRenderer>> ChatRenderer::Create(std::string_view source,
                                                                   std::string bos_token,
                                                                   std::string eos_token) {
  auto tmpl = ChatTemplate::Parse(source);
  if (!tmpl.ok()) return tmpl.status();
  return std::unique_ptr<ChatRenderer>(
      new TemplateRenderer(*std::move(tmpl), std::move(bos_token), std::move(eos_token)));
}

}  // namespace pagellm
