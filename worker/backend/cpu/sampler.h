// Token sampling on the CPU: penalties, temperature, top-k/top-p/min-p, per-request seeds and
// logprobs, and beam-search candidates, for one logits row at a time or for a SamplingBatch.
// The reference implementation of sampling_batch.h's contract; the CPU and mock backends sample
// through it.
#ifndef PAGELLM_WORKER_BACKEND_CPU_SAMPLER_H_
#define PAGELLM_WORKER_BACKEND_CPU_SAMPLER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/sampling/sampling_params.h"
#include "worker/backend/penalty_history.h"
#include "worker/backend/sampling_batch.h"

namespace pagellm {

// Samples next tokens from logits rows. Not thread-safe: it owns scratch buffers sized to the
// vocabulary that every call reuses, so after construction sampling allocates nothing. Use one
// Sampler per engine thread.
class Sampler {
 public:
  struct Options {
    int64_t vocab_size = 0;  // Width of a logits row.
    // The model's end-of-sequence tokens, suppressed while output size < min_tokens (unless
    // ignore_eos), like params.stop_token_ids.
    std::vector<int32_t> eos_token_ids = {};
  };

  // Returns InvalidArgument if vocab_size is not in [1, 2^31 - 8) or an EOS id is out of range.
  static absl::StatusOr<std::unique_ptr<Sampler>> Create(Options options);

  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;
  ~Sampler();

  // Picks the next token for `seq` from one logits row (vocab_size floats, not modified).
  // Order: logit_bias -> penalties -> seq.allowed_tokens -> min_tokens suppression -> greedy
  // argmax, or temperature -> top-k -> top-p -> min-p -> one draw from seq.rng at step
  // output_ids.size(). Errors: InvalidArgument if the row or the mask has the wrong size or a
  // history id is out of the vocab; FailedPrecondition if the logits hold NaN or +inf, or no token
  // is left with a finite logit.
  absl::StatusOr<SampleResult> Sample(absl::Span<const float> logits, const SequenceToSample& seq);

  // A scoring row's result: `token` with its raw logprob and rank, and the `num_top` most likely
  // tokens (sampling_batch.h). Errors as Sample (FailedPrecondition for NaN or +inf logits).
  absl::StatusOr<SampleResult> Score(absl::Span<const float> logits, int32_t token, int num_top);

  // Samples every row of `batch` from `logits` ([num_logits x vocab_size], row-major):
  // out->rows[i] gets row i's choice or error (one bad row does not fail the others), and a beam
  // row its top candidates. Returns InvalidArgument, touching nothing, if a row names a logits
  // row outside `logits`, asks for more candidates than the vocabulary holds, is a malformed
  // scoring row, or the batch's EOS ids are not the ones this sampler was created with.
  absl::Status SampleBatch(absl::Span<const float> logits, const SamplingBatch& batch,
                           SamplerOutput* out);

  // Appends the `count` most likely tokens of one raw logits row to `out` as (token,
  // log_softmax in double precision), best first (ties: lower id first), skipping the tokens in
  // `banned`.
  static void AppendTopCandidates(absl::Span<const float> logits, int32_t count,
                                  absl::Span<const int32_t> banned, std::vector<TopCandidate>* out);

  [[nodiscard]] int64_t vocab_size() const { return vocab_size_; }

  // The logits after penalties and min_tokens suppression from the last successful Sample().
  [[nodiscard]] absl::Span<const float> TEST_penalized_logits() const { return work_; }
  // The ids that survived top-k/top-p/min-p in the last sampled (non-greedy) Sample(), sorted.
  // Call before any logprobs-requesting Sample() reuses the scratch.
  [[nodiscard]] std::vector<int32_t> TEST_kept_ids() const;

 private:
  explicit Sampler(Options options);

  struct Peak;  // The largest logit and the lowest id holding it.

  // Applies repetition/presence/frequency penalties to work_ (which holds the row). Updates
  // `peak` with the penalized tokens and sets `peak_changed` if peak.id itself was penalized
  // (then only a rescan knows the peak). Returns InvalidArgument for an out-of-vocab history id.
  absl::Status ApplyPenalties(const SequenceToSample& seq, Peak& peak, bool& peak_changed);
  // Sets the EOS (unless ignore_eos) and stop-token logits in work_ to -inf. Returns true if
  // `peak_id` was among them.
  bool SuppressStopTokens(const SamplingParams& params, int32_t peak_id);
  // Draws one token from work_ (temperature, top-k, top-p, min-p) with uniform `u`.
  // REQUIRES: max_logit is work_'s finite maximum.
  int32_t SampleFromWork(const SamplingParams& params, float max_logit, double u);
  // The draw over the listed survivors idx_[0, n): the first id, in id order, whose cumulative
  // probs_ exceeds r (the last survivor if none does).
  int32_t DrawListed(int32_t n, double r);
  // Lists the k best ids of work_ in idx_[0, k) (any order); returns k. REQUIRES: 0 < k < vocab.
  int32_t SelectTopK(int32_t k);
  // Reduces the candidates idx_[0, n), whose probs_ are set and whose keys
  // (max_logit - logit) * inv_t are all below max_key (may be +inf), to the top-p nucleus: the
  // ids whose candidates ranked above them hold less than `target` mass. Sets kept_mass to the
  // nucleus' mass; returns its size.
  int32_t ApplyTopP(int32_t n, float max_logit, float inv_t, float max_key, double target,
                    double& kept_mass);
  // Fills the raw-distribution fields of `result` for result.token_id (uses probs_ as scratch).
  void FillLogprobs(absl::Span<const float> logits, float raw_max, int num_top,
                    SampleResult& result);

  const int64_t vocab_size_;
  const std::vector<int32_t> eos_token_ids_;
  // Scratch reused by every call; vocab_size_ long unless noted.
  std::vector<float> work_;          // Logits after penalties.
  std::vector<float> probs_;         // Unnormalized probabilities; valid for candidates only.
  std::vector<double> block_sums_;   // Sum of probs_ per 512 ids (dense candidates only).
  std::vector<double> bins_;         // Top-p histogram (4096 buckets).
  std::vector<int32_t> idx_;         // Candidate token ids.
  std::vector<int32_t> boundary_;    // Ids in the top-p histogram's crossing bucket.
  PenaltyHistory history_;           // The penalized ids of a row.
  int32_t last_num_kept_ = -1;       // Survivors listed in idx_ by the last draw; -1: dense.
  std::vector<int32_t> banned_;      // A beam row's suppressed ids, rebuilt per row.
  std::vector<uint64_t> kept_bits_;  // Listed survivors during a draw; all zero between calls.
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_CPU_SAMPLER_H_
