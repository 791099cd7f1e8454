// StopChecker design.
//
// pending_ holds text received but not released; state_ is the StopMatcher's state over the
// whole stream. Invariant (without include_stop_str_in_output): after each call
// Pending(state_) <= pending_.size(), because we hold back exactly that many bytes: the longest
// suffix of the stream that may still grow into a stop string. So a match found later starts
// inside pending_ and cutting before it never retracts released text. With
// include_stop_str_in_output nothing is held back: a later match ends after all released text,
// and cutting after it retracts nothing either.
#include "worker/engine/stop_checker.h"

#include <algorithm>
#include <utility>

#include "common/logging.h"

namespace pagellm {
namespace {

std::vector<int32_t> Sorted(std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

StopConditions::StopConditions(const SamplingParams& params,
                               absl::Span<const int32_t> eos_token_ids)
    : max_tokens(params.max_tokens),
      min_tokens(params.min_tokens),
      include_stop_str(params.include_stop_str_in_output),
      stop_token_ids_(Sorted(params.stop_token_ids)),
      eos_token_ids_(params.ignore_eos ? std::vector<int32_t>()
                                       : Sorted(std::vector<int32_t>(eos_token_ids.begin(),
                                                                     eos_token_ids.end()))),
      matcher_(params.stop) {}

std::shared_ptr<const StopConditions> StopConditions::Create(
    const SamplingParams& params, absl::Span<const int32_t> eos_token_ids) {
  return std::make_shared<const StopConditions>(params, eos_token_ids);
}

bool StopConditions::IsEos(int32_t id) const {
  return std::binary_search(eos_token_ids_.begin(), eos_token_ids_.end(), id);
}

bool StopConditions::IsStopToken(int32_t id) const {
  return std::binary_search(stop_token_ids_.begin(), stop_token_ids_.end(), id);
}

StopChecker::StopChecker(std::shared_ptr<const StopConditions> conditions)
    : conditions_(std::move(conditions)) {
  PAGELLM_CHECK(conditions_ != nullptr, "StopChecker needs its request's StopConditions");
}

StopChecker::StopChecker(const SamplingParams& params, absl::Span<const int32_t> eos_token_ids)
    : StopChecker(StopConditions::Create(params, eos_token_ids)) {}

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
  const StopConditions& c = *conditions_;
  ++num_output_tokens_;
  const bool may_stop = num_output_tokens_ > c.min_tokens;

  if (may_stop) {
    const bool eos = c.IsEos(token_id);
    const bool stop_token = !eos && c.IsStopToken(token_id);
    if (eos || stop_token) {
      if (c.include_stop_str) pending_.append(text_delta);
      StopDecision decision = Finish(FinishReason::kStop, emitted);
      if (stop_token) decision.stop_token_id = token_id;
      return decision;
    }
  }

  const StopMatcher& m = c.matcher();
  const size_t base = pending_.size();
  pending_.append(text_delta);
  if (!m.empty()) {
    for (size_t i = 0; i < text_delta.size(); ++i) {
      state_ = m.Next(state_, text_delta[i]);
      const int32_t k = may_stop ? m.Completed(state_) : -1;
      if (k < 0) continue;
      const std::string& stop = m.stop(k);
      const size_t end = base + i + 1;
      const size_t start = end - std::min(end, stop.size());
      pending_.resize(c.include_stop_str ? end : start);
      StopDecision decision = Finish(FinishReason::kStop, emitted);
      decision.stop_string_index = k;
      decision.stop_string = stop;
      return decision;
    }
  }

  if (num_output_tokens_ >= c.max_tokens) return Finish(FinishReason::kLength, emitted);

  const size_t hold = c.include_stop_str ? 0 : std::min<size_t>(m.Pending(state_), pending_.size());
  const size_t release = pending_.size() - hold;
  emitted->append(pending_, 0, release);
  pending_.erase(0, release);
  return StopDecision{};
}

}  // namespace pagellm
