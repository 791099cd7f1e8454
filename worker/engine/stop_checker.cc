// StopChecker design.
//
// pending_ holds text received but not released. Each stop string runs a KMP automaton over
// every byte of the stream; its state `matched` is the longest prefix of the stop string that
// ends the stream. Invariant (without include_stop_str_in_output): after each call every
// automaton's `matched` <= pending_.size(), because we hold back exactly max(matched) bytes. So
// a match found later starts inside pending_ and cutting before it never retracts released
// text. With include_stop_str_in_output nothing is held back: a later match ends after all
// released text, and cutting after it retracts nothing either.
#include "worker/engine/stop_checker.h"

#include <algorithm>

#include "common/logging.h"

namespace pagellm {
namespace {

std::vector<int32_t> PrefixFunction(const std::string& s) {
  std::vector<int32_t> pi(s.size(), 0);
  for (size_t i = 1; i < s.size(); ++i) {
    int32_t q = pi[i - 1];
    while (q > 0 && s[i] != s[q]) q = pi[q - 1];
    if (s[i] == s[q]) ++q;
    pi[i] = q;
  }
  return pi;
}

}  // namespace

StopChecker::StopChecker(const SamplingParams& params, absl::Span<const int32_t> eos_token_ids)
    : max_tokens_(params.max_tokens),
      min_tokens_(params.min_tokens),
      include_stop_str_(params.include_stop_str_in_output),
      stop_token_ids_(params.stop_token_ids),
      eos_token_ids_(params.ignore_eos
                         ? std::vector<int32_t>()
                         : std::vector<int32_t>(eos_token_ids.begin(), eos_token_ids.end())) {
  stops_.reserve(params.stop.size());
  for (const std::string& s : params.stop) {
    PAGELLM_CHECK(!s.empty(), "empty stop string; SamplingParams::Validate() was not called");
    stops_.push_back(StopString{s, PrefixFunction(s), 0});
  }
}

int32_t StopChecker::Advance(char c, bool may_stop) {
  int32_t completed = -1;
  for (size_t k = 0; k < stops_.size(); ++k) {
    StopString& s = stops_[k];
    int32_t q = s.matched;
    while (q > 0 && s.text[q] != c) q = s.failure[q - 1];
    if (s.text[q] == c) ++q;
    if (q == static_cast<int32_t>(s.text.size())) {
      if (may_stop && (completed < 0 || s.text.size() > stops_[completed].text.size())) {
        completed = static_cast<int32_t>(k);
      }
      q = s.failure[q - 1];  // Keep scanning past an ignored (or already decided) match.
    }
    s.matched = q;
  }
  return completed;
}

StopDecision StopChecker::Finish(FinishReason reason, std::string* emitted) {
  emitted->append(pending_);
  pending_.clear();
  finished_ = true;
  StopDecision decision;
  decision.finish_reason = reason;
  return decision;
}

StopDecision StopChecker::Append(int32_t token_id, std::string_view text_delta,
                                 std::string* emitted) {
  PAGELLM_CHECK(!finished_, "StopChecker::Append after the sequence finished ({} tokens)",
                num_output_tokens_);
  ++num_output_tokens_;
  const bool may_stop = num_output_tokens_ > min_tokens_;

  if (may_stop) {
    const bool eos =
        std::find(eos_token_ids_.begin(), eos_token_ids_.end(), token_id) != eos_token_ids_.end();
    const bool stop_token = !eos && std::find(stop_token_ids_.begin(), stop_token_ids_.end(),
                                              token_id) != stop_token_ids_.end();
    if (eos || stop_token) {
      if (include_stop_str_) pending_.append(text_delta);
      StopDecision decision = Finish(FinishReason::kStop, emitted);
      if (stop_token) decision.stop_token_id = token_id;
      return decision;
    }
  }

  const size_t base = pending_.size();
  pending_.append(text_delta);
  for (size_t i = 0; i < text_delta.size(); ++i) {
    const int32_t k = Advance(text_delta[i], may_stop);
    if (k < 0) continue;
    const size_t end = base + i + 1;
    const size_t start = end - std::min(end, stops_[k].text.size());
    pending_.resize(include_stop_str_ ? end : start);
    StopDecision decision = Finish(FinishReason::kStop, emitted);
    decision.stop_string_index = k;
    decision.stop_string = stops_[k].text;
    return decision;
  }

  if (num_output_tokens_ >= max_tokens_) return Finish(FinishReason::kLength, emitted);

  size_t hold = 0;
  if (!include_stop_str_) {
    for (const StopString& s : stops_) hold = std::max(hold, static_cast<size_t>(s.matched));
    hold = std::min(hold, pending_.size());
  }
  const size_t release = pending_.size() - hold;
  emitted->append(pending_, 0, release);
  pending_.erase(0, release);
  return StopDecision{};
}

}  // namespace pagellm
