// PenaltyHistory: the tokens a row's repetition/presence/frequency penalties apply to, each
// once, with its count in the output -- what every sampler (CPU, GPU) needs before it can
// penalize a logits row. O(history) per call: the vocabulary-sized scratch is cleared by
// walking the ids it touched.
//
// Not thread-safe: one per sampler, reused across calls; allocates nothing once constructed
// (touched ids are reserved to the vocabulary).
#ifndef PAGELLM_WORKER_BACKEND_PENALTY_HISTORY_H_
#define PAGELLM_WORKER_BACKEND_PENALTY_HISTORY_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/backend/sampling_batch.h"

namespace pagellm {

class PenaltyHistory {
 public:
  explicit PenaltyHistory(int64_t vocab_size);
  PenaltyHistory(const PenaltyHistory&) = delete;
  PenaltyHistory& operator=(const PenaltyHistory&) = delete;

  // Calls visit(id, output_count) once for each distinct id of seq's output and, when
  // repetition_penalty != 1, of its prompt (prompt-only ids have count 0), in first-seen order.
  // Returns InvalidArgument, visiting nothing, if an id is outside the vocabulary.
  template <typename Visit>
  absl::Status ForEach(const SequenceToSample& seq, Visit visit) {
    absl::Status status = Mark(seq);
    if (status.ok()) {
      for (int32_t t : touched_) visit(t, counts_[t]);
    }
    Clear();
    return status;
  }

 private:
  absl::Status Mark(const SequenceToSample& seq);
  void Clear();

  const int64_t vocab_size_;
  std::vector<int32_t> counts_;  // all zero between calls
  std::vector<uint8_t> seen_;    // all zero between calls
  std::vector<int32_t> touched_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_PENALTY_HISTORY_H_
