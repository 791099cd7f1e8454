// Decides when a sequence is finished and how much of its detokenized text is safe to stream.
#ifndef PAGELLM_WORKER_ENGINE_STOP_CHECKER_H_
#define PAGELLM_WORKER_ENGINE_STOP_CHECKER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "common/sampling/finish_reason.h"
#include "common/sampling/sampling_params.h"
#include "worker/engine/stop_matcher.h"

namespace pagellm {

// The outcome of one generated token.
struct StopDecision {
  FinishReason finish_reason = FinishReason::kNone;
  // Set when a params.stop_token_ids entry ended the sequence, else -1. EOS sets neither this
  // nor stop_string (OpenAI's "stop_reason": null).
  int32_t stop_token_id = -1;
  // When a stop string ended the sequence: its index in params.stop (else -1) and its text
  // (points into the StopConditions; valid while they live).
  int32_t stop_string_index = -1;
  std::string_view stop_string;

  [[nodiscard]] bool finished() const { return finish_reason != FinishReason::kNone; }
};

// A request's stop conditions, built once when the request is added and shared read-only by all
// of its sequences (parallel samples), so that n samples cost one copy of the stop strings and
// one automaton. Thread-safe: immutable.
class StopConditions {
 public:
  // Copies what it needs from `params` (REQUIRES: Validate()d) and the model's EOS ids.
  static std::shared_ptr<const StopConditions> Create(const SamplingParams& params,
                                                      absl::Span<const int32_t> eos_token_ids);

  StopConditions(const SamplingParams& params, absl::Span<const int32_t> eos_token_ids);
  StopConditions(const StopConditions&) = delete;
  StopConditions& operator=(const StopConditions&) = delete;

  [[nodiscard]] const StopMatcher& matcher() const { return matcher_; }
  // Whether `id` is an EOS id (never when ignore_eos) / one of params.stop_token_ids.
  [[nodiscard]] bool IsEos(int32_t id) const;
  [[nodiscard]] bool IsStopToken(int32_t id) const;

  const int32_t max_tokens;
  const int32_t min_tokens;
  const bool include_stop_str;

 private:
  const std::vector<int32_t> stop_token_ids_;  // sorted; EOS ids (unless ignore_eos) not in here
  const std::vector<int32_t> eos_token_ids_;   // sorted; empty when ignore_eos
  const StopMatcher matcher_;
};

// Per-sequence stop logic, fed once per generated token with that token's text delta from the
// streaming detokenizer. It releases text in order and never releases text that might still
// turn out to be part of a stop string:
//  * Stop strings are matched bytewise over the whole text stream (so across token boundaries;
//    UTF-8 stop strings match exactly the characters they spell). The output is cut before the
//    match, or after it with include_stop_str_in_output.
//  * Without include_stop_str_in_output, the longest tail of the text that is a proper prefix
//    of some stop string is held back until later text settles it; when the sequence ends
//    without a stop string, held-back text is released.
//  * When several stop strings match, the one whose match ENDS first in the text wins (ties:
//    the longer one). So the result does not depend on how the text was split into deltas.
//  * EOS (unless ignore_eos) and params.stop_token_ids finish with "stop"; that token's text is
//    dropped unless include_stop_str_in_output.
//  * Nothing finishes with "stop" while the count of tokens (this one included) is
//    <= min_tokens; stop strings completed in that window are ignored.
//  * Precedence on one token: EOS > stop token > stop string > max_tokens ("length").
// The engine still owns other limits (context length, abort). Cost per token: O(delta bytes)
// amortized plus O(log stop token ids), whatever the number of stop strings (StopMatcher).
// Memory per sequence: the held-back text (< the longest stop string) and a few words.
// Not thread-safe; one per sequence, used by the engine thread.
class StopChecker {
 public:
  // REQUIRES: conditions != nullptr.
  explicit StopChecker(std::shared_ptr<const StopConditions> conditions);
  // Convenience for tests: builds the conditions for this checker alone.
  StopChecker(const SamplingParams& params, absl::Span<const int32_t> eos_token_ids);

  // Records generated token `token_id` whose detokenized text is `text_delta` (possibly empty),
  // appends the text that is now safe to stream to *emitted, and says whether the sequence has
  // finished. After a finishing call all text has been released; further calls are a bug.
  // REQUIRES: !finished(), emitted != nullptr.
  StopDecision Append(int32_t token_id, std::string_view text_delta, std::string* emitted);

  // Ends the sequence for a reason of the caller's (its structured output is complete),
  // releasing the held-back text. REQUIRES: !finished(), emitted != nullptr.
  StopDecision Finish(FinishReason reason, std::string* emitted);

  [[nodiscard]] bool finished() const { return finished_; }
  // Tokens passed to Append so far.
  [[nodiscard]] int32_t num_output_tokens() const { return num_output_tokens_; }
  // Bytes received but not yet released.
  [[nodiscard]] size_t num_held_back_bytes() const { return pending_.size(); }

 private:
  std::shared_ptr<const StopConditions> conditions_;
  StopMatcher::State state_ = 0;  // the matcher's state after all text received
  std::string pending_;           // Received, not yet released text.
  int32_t num_output_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_STOP_CHECKER_H_
