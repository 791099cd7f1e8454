#include "worker/backend/penalty_history.h"

#include "absl/strings/str_cat.h"

namespace pagellm {

PenaltyHistory::PenaltyHistory(int64_t vocab_size)
    : vocab_size_(vocab_size), counts_(vocab_size, 0), seen_(vocab_size, 0) {
  touched_.reserve(vocab_size);
}

absl::Status PenaltyHistory::Mark(const SequenceToSample& seq) {
  auto mark = [&](absl::Span<const int32_t> ids, bool count) {
    for (int32_t t : ids) {
      if (t < 0 || t >= vocab_size_) {
        return absl::InvalidArgumentError(
            absl::StrCat("Sampler: token id ", t,
                         " in the sequence history is outside the vocab of ", vocab_size_));
      }
      if (!seen_[t]) {
        seen_[t] = 1;
        touched_.push_back(t);
      }
      if (count) ++counts_[t];
    }
    return absl::OkStatus();
  };
  if (seq.params->repetition_penalty != 1.0f) {
    if (absl::Status s = mark(seq.prompt_ids, /*count=*/false); !s.ok()) return s;
  }
  return mark(seq.output_ids, /*count=*/true);
}

void PenaltyHistory::Clear() {
  for (int32_t t : touched_) {
    seen_[t] = 0;
    counts_[t] = 0;
  }
  touched_.clear();
}

}  // namespace pagellm
