// N-gram speculation ("prompt lookup decoding", vLLM's `"method": "ngram"`): guesses a
// sequence's next tokens from its own context, with no draft model. When the last n tokens
// (n from prompt_lookup_max down to prompt_lookup_min) also occur earlier in the prompt or the
// output, the tokens that followed that earlier occurrence are proposed. The target model then
// checks every guess in one forward pass (see Engine); text that repeats its context (code
// edits, extraction, summaries quoting the source, JSON keys) advances several tokens a step.
//
// Stateless and allocation-free: a pure function of the tokens. O(len * n) per call.
#ifndef PAGELLM_WORKER_ENGINE_NGRAM_PROPOSER_H_
#define PAGELLM_WORKER_ENGINE_NGRAM_PROPOSER_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace pagellm {

struct NgramOptions {
  int32_t num_speculative_tokens = 0;  // tokens proposed per step; 0: no speculation
  int32_t prompt_lookup_max = 5;       // longest suffix matched
  int32_t prompt_lookup_min = 5;       // shortest suffix matched, 1 <= min <= max
  // Speculate only in steps with at most this many running sequences (0: always). A large
  // batch is compute-bound: every rejected guess costs a token's worth of work.
  int32_t disable_by_batch_size = 0;

  [[nodiscard]] bool enabled() const { return num_speculative_tokens > 0; }
  // InvalidArgument naming the field for sizes out of range (speculative tokens <= 32, n-grams
  // <= 64).
  [[nodiscard]] absl::Status Validate() const;
};

// Writes up to `out.size()` proposed tokens into `out` and returns how many (0: no match).
// The match taken is the longest suffix of `tokens` (within the options' bounds) that occurs
// earlier, at its most recent earlier occurrence; the proposal is what followed it, up to the
// end of `tokens`.
int32_t ProposeNgram(std::span<const int32_t> tokens, const NgramOptions& options,
                     std::span<int32_t> out);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_NGRAM_PROPOSER_H_
