#include "worker/engine/ngram_proposer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pagellm {
namespace {

constexpr int32_t kMaxSpeculativeTokens = 32;
constexpr int32_t kMaxNgram = 64;

}  // namespace

absl::Status NgramOptions::Validate() const {
  if (num_speculative_tokens < 0 || num_speculative_tokens > kMaxSpeculativeTokens) {
    return absl::InvalidArgumentError(absl::StrCat("num_speculative_tokens must be in [0, ",
                                                   kMaxSpeculativeTokens, "], got ",
                                                   num_speculative_tokens));
  }
  if (prompt_lookup_min < 1 || prompt_lookup_max > kMaxNgram ||
      prompt_lookup_min > prompt_lookup_max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt_lookup_min and prompt_lookup_max must satisfy 1 <= min <= max <= ", kMaxNgram,
        ", got ", prompt_lookup_min, " and ", prompt_lookup_max));
  }
  if (disable_by_batch_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("disable_by_batch_size must be >= 0, got ", disable_by_batch_size));
  }
  return absl::OkStatus();
}

int32_t ProposeNgram(std::span<const int32_t> tokens, const NgramOptions& options,
                     std::span<int32_t> out) {
  const auto len = static_cast<int64_t>(tokens.size());
  if (out.empty() || len < options.prompt_lookup_min + 1) return 0;
  const int64_t max_n = std::min<int64_t>(options.prompt_lookup_max, len - 1);
  // An earlier occurrence of the suffix ends at `end` (exclusive) when tokens[end - n, end)
  // equals the last n tokens. Walk `end` from the most recent and keep the longest.
  int64_t best_end = -1;
  int64_t best_n = 0;
  for (int64_t end = len - 1; end >= options.prompt_lookup_min; --end) {
    int64_t n = 0;
    while (n < max_n && n < end && tokens[end - 1 - n] == tokens[len - 1 - n]) ++n;
    if (n > best_n) {
      best_n = n;
      best_end = end;
      if (n == max_n) break;  // the longest possible, at its most recent occurrence
    }
  }
  if (best_n < options.prompt_lookup_min) return 0;
  const int64_t count = std::min<int64_t>(static_cast<int64_t>(out.size()), len - best_end);
  std::copy_n(tokens.begin() + best_end, count, out.begin());
  return static_cast<int32_t>(count);
}

}  // namespace pagellm
