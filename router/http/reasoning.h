// Reasoning ("thinking") read out of a chat reply: the text a reasoning model writes between
// <think> and </think> comes back apart from its answer, as vLLM's --reasoning-parser returns
// it (the message's `reasoning`, and `reasoning_content` as DeepSeek's API and older vLLM name
// it). The reply is reasoning from its start (a leading <think>, which older templates leave to
// the model, is dropped) to </think>, then the answer; a reply that never closes it is all
// reasoning (cut short while thinking). The tags are in neither part. Formats, by vLLM's names
// (--reasoning-parser):
//   deepseek_r1: DeepSeek-R1 and its distills, QwQ, Qwen3 "thinking-2507".
//   qwen3: Qwen3 and Qwen3.5, which think unless the request's chat_template_kwargs set
//     enable_thinking to false (the template then closes the thinking in the prompt): such a
//     reply is all answer (ThinksFor).
//
// Thread-safe: the functions are pure; a ReasoningStreamSplitter belongs to one choice.
#ifndef PAGELLM_ROUTER_HTTP_REASONING_H_
#define PAGELLM_ROUTER_HTTP_REASONING_H_

#include <optional>
#include <string>
#include <string_view>

namespace pagellm {

enum class ReasoningFormat { kDeepSeekR1, kQwen3 };
// "deepseek_r1" or "qwen3"; nullopt for another name.
std::optional<ReasoningFormat> ReasoningFormatNamed(std::string_view name);

struct ReasoningSplit {
  std::optional<std::string> reasoning;  // nullopt: the reply did not reason
  std::optional<std::string> content;    // nullopt: nothing after the reasoning
};
ReasoningSplit SplitReasoning(std::string_view text);

// Whether replies to a request are split: false for qwen3 when `chat_template_kwargs` (JSON
// text, may be empty) sets enable_thinking to false.
bool ThinksFor(ReasoningFormat format, std::string_view chat_template_kwargs);

// A reply as it streams: Feed appends to `reasoning` and `content` what is known to belong to
// each, holding back only what may be the start of a tag; Finish the rest. What it hands out,
// joined, is what SplitReasoning gives for the whole reply.
class ReasoningStreamSplitter {
 public:
  void Feed(std::string_view text, std::string* reasoning, std::string* content);
  void Finish(std::string* reasoning, std::string* content);

 private:
  enum class State { kStart, kReasoning, kContent };
  void Drain(bool at_end, std::string* reasoning, std::string* content);

  State state_ = State::kStart;
  std::string pending_;
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_REASONING_H_
