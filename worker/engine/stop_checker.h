// Decides when a sequence is finished and how much of its detokenized text is safe to stream.
#ifndef PAGELLM_WORKER_ENGINE_STOP_CHECKER_H_
#define PAGELLM_WORKER_ENGINE_STOP_CHECKER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "common/sampling/finish_reason.h"
#include "common/sampling/sampling_params.h"

namespace pagellm {

// The outcome of one generated token.
struct StopDecision {
  FinishReason finish_reason = FinishReason::kNone;
  // Set when a params.stop_token_ids entry ended the sequence, else -1. EOS sets neither this
  // nor stop_string (OpenAI's "stop_reason": null).
  int32_t stop_token_id = -1;
  // When a stop string ended the sequence: its index in params.stop (else -1) and its text
  // (points into the StopChecker; valid while it lives).
  int32_t stop_string_index = -1;
  std::string_view stop_string;

  [[nodiscard]] bool finished() const { return finish_reason != FinishReason::kNone; }
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
// The engine still owns other limits (context length, abort). Cost per token is O(delta bytes x
// number of stop strings), amortized (one KMP automaton per stop string).
// Not thread-safe; one per sequence, used by the engine thread.
class StopChecker {
 public:
  // Copies what it needs from `params` (REQUIRES: Validate()d) and the model's EOS ids.
  StopChecker(const SamplingParams& params, absl::Span<const int32_t> eos_token_ids);

  // Records generated token `token_id` whose detokenized text is `text_delta` (possibly empty),
  // appends the text that is now safe to stream to *emitted, and says whether the sequence has
  // finished. After a finishing call all text has been released; further calls are a bug.
  // REQUIRES: !finished(), emitted != nullptr.
  StopDecision Append(int32_t token_id, std::string_view text_delta, std::string* emitted);

  [[nodiscard]] bool finished() const { return finished_; }
  // Tokens passed to Append so far.
  [[nodiscard]] int32_t num_output_tokens() const { return num_output_tokens_; }
  // Bytes received but not yet released.
  [[nodiscard]] size_t num_held_back_bytes() const { return pending_.size(); }

 private:
  struct StopString {
    std::string text;
    std::vector<int32_t> failure;  // KMP prefix function of text.
    int32_t matched = 0;           // Longest prefix of text that is a suffix of the stream.
  };

  // Feeds one byte to every automaton; returns the index of the stop string completed by it
  // (the longest when several), or -1. Completed matches are ignored unless `may_stop`.
  int32_t Advance(char c, bool may_stop);
  StopDecision Finish(FinishReason reason, std::string* emitted);

  const int32_t max_tokens_;
  const int32_t min_tokens_;
  const bool include_stop_str_;
  const std::vector<int32_t> stop_token_ids_;  // EOS ids (unless ignore_eos) are not in here.
  const std::vector<int32_t> eos_token_ids_;   // Empty when ignore_eos.
  std::vector<StopString> stops_;
  std::string pending_;  // Received, not yet released text.
  int32_t num_output_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_STOP_CHECKER_H_
