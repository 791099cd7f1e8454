// Token sampling on the CPU: penalties, temperature, top-k/top-p/min-p, per-request seeds and
// logprobs, for one logits row at a time or for a batch of rows.
#ifndef PAGELLM_WORKER_ENGINE_SAMPLER_H_
#define PAGELLM_WORKER_ENGINE_SAMPLER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/sampling/sampling_params.h"

namespace pagellm {

// A request's random stream, counter-based: the uniform draw for output position `step` is a
// pure function of (seed, step) -- splitmix64 seeded with the request seed and jumped to `step`.
// So a seeded request produces the same tokens whatever else shares its batch, and replaying a
// step (preemption by recompute) replays its draw. A trivially copyable value; thread-safe.
class SamplingRng {
 public:
  explicit SamplingRng(uint64_t seed) : seed_(seed) {}

  // Uses params.seed when set, else draws a fresh random seed (call once per request, when the
  // request is created, and keep the result with the request).
  static SamplingRng ForRequest(const SamplingParams& params);

  // The stream of parallel sample `index` of the same request: this stream for index 0, an
  // independent one derived from (seed, index) otherwise.
  [[nodiscard]] SamplingRng ForSample(int32_t index) const;

  // Returns a uniform double in [0, 1) for output position `step`.
  [[nodiscard]] double Uniform(uint64_t step) const;

  [[nodiscard]] uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
};

struct TokenLogprob {
  int32_t token_id = -1;
  float logprob = 0.0f;
};

// What Sample() chose. Fixed size, so returning it allocates nothing.
struct SampleResult {
  int32_t token_id = -1;
  // The remaining fields are valid only when params.logprobs is set. Logprobs are of the RAW
  // model distribution -- log_softmax of the logits before penalties, temperature and
  // truncation -- as vLLM's default ("raw_logprobs"): they describe the model, not the sampler,
  // so they are comparable across sampling settings.
  float logprob = 0.0f;  // Of token_id.
  int32_t rank = 0;      // 1 + the number of tokens with a strictly larger raw logit.
  int32_t num_top_logprobs = 0;
  std::array<TokenLogprob, kMaxLogprobs> top_logprobs_storage;

  // The params.logprobs most likely tokens, most likely first (ties: lower id first).
  [[nodiscard]] absl::Span<const TokenLogprob> top_logprobs() const {
    return absl::MakeConstSpan(top_logprobs_storage.data(), num_top_logprobs);
  }
};

// One sequence's inputs to a sampling step. Everything is borrowed for the duration of the call.
struct SequenceToSample {
  const SamplingParams* params = nullptr;  // REQUIRES: non-null, Validate()d.
  absl::Span<const int32_t> prompt_ids{};  // Read only when repetition_penalty != 1.
  absl::Span<const int32_t> output_ids{};  // Tokens generated so far; its size is the step.
  SamplingRng rng{0};
};

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
  // Order: penalties -> min_tokens suppression -> greedy argmax, or temperature -> top-k ->
  // top-p -> min-p -> one draw from seq.rng at step output_ids.size().
  // Errors: InvalidArgument if the row has the wrong size or a history id is out of the vocab;
  // FailedPrecondition if the logits hold NaN or +inf, or no token is left with a finite logit.
  absl::StatusOr<SampleResult> Sample(absl::Span<const float> logits, const SequenceToSample& seq);

  // Samples every row of `logits` ([seqs.size() x vocab_size], row-major); results[i] gets
  // sequence i's result or error (one bad sequence does not fail the others). Returns
  // InvalidArgument, touching nothing, if the shapes disagree.
  // REQUIRES: results.size() == seqs.size().
  absl::Status SampleBatch(absl::Span<const float> logits, absl::Span<const SequenceToSample> seqs,
                           absl::Span<absl::StatusOr<SampleResult>> results);

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
  std::vector<float> work_;         // Logits after penalties.
  std::vector<float> probs_;        // Unnormalized probabilities; valid for candidates only.
  std::vector<double> block_sums_;  // Sum of probs_ per 512 ids (dense candidates only).
  std::vector<double> bins_;        // Top-p histogram (4096 buckets).
  std::vector<int32_t> idx_;        // Candidate token ids.
  std::vector<int32_t> boundary_;   // Ids in the top-p histogram's crossing bucket.
  std::vector<int32_t> counts_;     // Output-token counts; all zero between calls.
  std::vector<uint8_t> seen_;       // Seen in prompt or output; all zero between calls.
  std::vector<int32_t> touched_;    // Ids with nonzero counts_/seen_ during a call.
  int32_t last_num_kept_ = -1;      // Survivors listed in idx_ by the last draw; -1: dense.
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_SAMPLER_H_
