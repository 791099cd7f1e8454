#include "router/http/reasoning.h"

#include "nlohmann/json.hpp"
#include "router/http/partial_tag.h"

namespace pagellm {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kSpace = " \t\r\n";

// Where the text after a leading <think> (after whitespace) starts; npos without one.
size_t AfterLeadingOpen(std::string_view text) {
  const size_t at = text.find_first_not_of(kSpace);
  if (at == std::string_view::npos || text.substr(at, kThinkOpen.size()) != kThinkOpen) {
    return std::string_view::npos;
  }
  return at + kThinkOpen.size();
}

}  // namespace

std::optional<ReasoningFormat> ReasoningFormatNamed(std::string_view name) {
  if (name == "deepseek_r1") return ReasoningFormat::kDeepSeekR1;
  if (name == "qwen3") return ReasoningFormat::kQwen3;
  return std::nullopt;
}

ReasoningSplit SplitReasoning(std::string_view text) {
  ReasoningSplit split;
  size_t begin = AfterLeadingOpen(text);
  if (begin == std::string_view::npos) begin = 0;
  const size_t close = text.find(kThinkClose, begin);
  if (close == std::string_view::npos) {
    split.reasoning = std::string(text.substr(begin));
    return split;
  }
  split.reasoning = std::string(text.substr(begin, close - begin));
  const std::string_view rest = text.substr(close + kThinkClose.size());
  if (!rest.empty()) split.content = std::string(rest);
  return split;
}

bool ThinksFor(ReasoningFormat format, std::string_view chat_template_kwargs) {
  if (format != ReasoningFormat::kQwen3 || chat_template_kwargs.empty()) return true;
  const nlohmann::json kwargs =
      nlohmann::json::parse(chat_template_kwargs, nullptr, /*allow_exceptions=*/false);
  if (!kwargs.is_object()) return true;
  auto it = kwargs.find("enable_thinking");
  return it == kwargs.end() || !it->is_boolean() || it->get<bool>();
}

void ReasoningStreamSplitter::Feed(std::string_view text, std::string* reasoning,
                                   std::string* content) {
  if (state_ == State::kContent) {
    content->append(text);
    return;
  }
  pending_.append(text);
  Drain(/*at_end=*/false, reasoning, content);
}

void ReasoningStreamSplitter::Finish(std::string* reasoning, std::string* content) {
  Drain(/*at_end=*/true, reasoning, content);
}

void ReasoningStreamSplitter::Drain(bool at_end, std::string* reasoning, std::string* content) {
  if (state_ == State::kStart) {
    const size_t at = pending_.find_first_not_of(kSpace);
    const std::string_view rest =
        at == std::string::npos ? std::string_view() : std::string_view(pending_).substr(at);
    if (!at_end && rest.size() < kThinkOpen.size() && kThinkOpen.substr(0, rest.size()) == rest) {
      return;  // whitespace, or what may still become <think>
    }
    const size_t begin = AfterLeadingOpen(pending_);
    if (begin != std::string::npos) pending_.erase(0, begin);
    state_ = State::kReasoning;
  }
  if (state_ == State::kReasoning) {
    const size_t close = pending_.find(kThinkClose);
    if (close == std::string::npos) {
      const size_t keep = at_end ? 0 : PartialTagSuffix(pending_, kThinkClose);
      reasoning->append(pending_, 0, pending_.size() - keep);
      pending_.erase(0, pending_.size() - keep);
      return;
    }
    reasoning->append(pending_, 0, close);
    pending_.erase(0, close + kThinkClose.size());
    state_ = State::kContent;
  }
  content->append(pending_);
  pending_.clear();
}

}  // namespace pagellm
