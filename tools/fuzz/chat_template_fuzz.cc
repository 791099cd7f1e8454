// libFuzzer target for the chat-template interpreter: ChatTemplate::Parse, then Render.
//
// Input: byte 0 holds add_generation_prompt (bit 0) and picks the bos/eos tokens (bits 1-2);
// the rest is split at NUL bytes into the template source, then role, content, role, content...
// (a trailing role without content gets empty content).
//
// Invariants (abort() when one fails): every error is InvalidArgument; a render gives valid
// UTF-8 within the output limit, and the same text when run again. Render limits are smaller
// than the defaults so that each input stays fast; a limit reached is just an error.
//
// Build and run: see tools/fuzz/run_ci.sh (seeds in tools/fuzz/seeds/chat_template_fuzz/, made
// by tools/fuzz/make_chat_template_seeds.py; dictionary tools/fuzz/chat_template.dict).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/chat_template/chat_template.h"
#include "common/utf8.h"
#include "tools/fuzz/fuzz_check.h"

namespace {

constexpr const char* kSpecialTokens[4][2] = {
    {"<s>", "</s>"},
    {"<|im_start|>", "<|im_end|>"},
    {"<|begin_of_text|>", "<|eot_id|>"},
    {"", ""},
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t nul = rest.find('\0');
    parts.push_back(rest.substr(0, nul));
    if (nul == std::string_view::npos) break;
    rest.remove_prefix(nul + 1);
  }
  auto tmpl = pagellm::ChatTemplate::Parse(parts[0]);
  if (!tmpl.ok()) {
    FUZZ_CHECK(tmpl.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  std::vector<pagellm::ChatMessage> messages;
  for (size_t i = 1; i < parts.size(); i += 2) {
    pagellm::ChatMessage m;
    m.role = std::string(parts[i]);
    if (i + 1 < parts.size()) m.content = std::string(parts[i + 1]);
    messages.push_back(std::move(m));
  }
  pagellm::RenderOptions options;
  options.add_generation_prompt = flags & 1;
  options.bos_token = kSpecialTokens[(flags >> 1) & 3][0];
  options.eos_token = kSpecialTokens[(flags >> 1) & 3][1];
  options.limits.max_output_bytes = 1 << 14;
  options.limits.max_string_bytes = 1 << 14;
  options.limits.max_allocated_bytes = 1 << 20;
  options.limits.max_steps = 20'000;  // real templates need a few thousand on these inputs
  auto text = (*tmpl)->Render(messages, options);
  if (!text.ok()) {
    FUZZ_CHECK(text.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(text->size() <= options.limits.max_output_bytes);
  FUZZ_CHECK(pagellm::IsValidUtf8(*text));
  auto again = (*tmpl)->Render(messages, options);
  FUZZ_CHECK(again.ok() && *again == *text);
  return 0;
}
