// SamplingBatch / SamplerOutput: the sampling half of a step, behind the backend. The engine
// says, for each row to sample, everything the choice depends on (parameters, seed stream and
// output position, penalty history, logprob count, or the beam width); the backend samples
// where its logits are and returns token ids, the requested logprobs, and for beam search the
// top candidates of each beam. Full-vocabulary logits never have to leave the device (cf. vLLM
// v1's ModelRunnerOutput.sampled_token_ids).
//
// Every sampler implementation gives the same answer for the same row: the CPU one
// (worker/backend/cpu/sampler.h) is the reference, and the semantics are its contract --
// logit bias -> penalties -> allowed tokens -> min_tokens suppression -> greedy argmax, or
// temperature -> top-k -> top-p -> min-p -> one draw from rng at output position output_ids.size();
// logprobs are of the raw model distribution. A scoring row (prompt logprobs) reports a given
// token's logprob instead.
//
// Spans are borrowed from the engine for the duration of the call.
#ifndef PAGELLM_WORKER_BACKEND_SAMPLING_BATCH_H_
#define PAGELLM_WORKER_BACKEND_SAMPLING_BATCH_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/sampling/sampling_params.h"
#include "worker/backend/sampling_rng.h"

namespace pagellm {

// One sequence's inputs to a sampling step.
struct SequenceToSample {
  const SamplingParams* params = nullptr;  // REQUIRES: non-null, Validate()d.
  absl::Span<const int32_t> prompt_ids{};  // Read only when repetition_penalty != 1.
  absl::Span<const int32_t> output_ids{};  // Tokens generated so far; its size is the step.
  SamplingRng rng{0};
  // Structured output: empty, or a bitmask over the vocabulary ((vocab + 63) / 64 words, bit t
  // of word t / 64) of the tokens allowed next; the others are removed (-inf) after penalties,
  // before min_tokens suppression and the choice. Logprobs stay those of the raw distribution.
  absl::Span<const uint64_t> allowed_tokens{};
};

// One row to sample. Several rows may read the same logits row: the n samples of a request
// choosing their first tokens from the prompt's last logits.
struct SamplingRow {
  int32_t logits_row = 0;  // REQUIRES: in [0, ForwardBatch::num_logits)
  SequenceToSample seq;
  // > 0: a beam-search row. Instead of sampling, return this many (token, logprob) pairs of the
  // raw distribution, most likely first (ties: lower id first), skipping the EOS and stop
  // tokens while output_ids.size() < min_tokens. Penalties and truncation do not apply.
  int32_t num_top_candidates = 0;
  // >= 0: a scoring row (prompt logprobs): nothing is sampled. The result is this token (the
  // prompt's next token) with its raw logprob and rank, and the params.prompt_logprobs most
  // likely tokens, as for a sampled token; penalties, truncation and min_tokens do not apply.
  // REQUIRES: < the vocabulary size; params.prompt_logprobs set; num_top_candidates == 0.
  int32_t score_token = -1;
};

struct SamplingBatch {
  absl::Span<const SamplingRow> rows;
  // The model's end-of-generation ids: suppressed while output < min_tokens (unless ignore_eos).
  absl::Span<const int32_t> eos_token_ids;
};

struct TokenLogprob {
  int32_t token_id = -1;
  float logprob = 0.0f;
};

// What sampling chose for one (non-beam) row. Fixed size, so filling it allocates nothing.
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

// A beam-search candidate: log_softmax of the raw logits, in double precision.
struct TopCandidate {
  int32_t token_id = -1;
  double logprob = 0.0;
};

struct SampledRow {
  // Per-row failure (FailedPrecondition for NaN/+inf logits or no finite logit left;
  // InvalidArgument for a history id outside the vocabulary). Other rows are unaffected.
  absl::Status status;
  SampleResult result;  // a sampling row's choice
  // A beam row's candidates: SamplerOutput::candidates[first_candidate, + num_candidates).
  int32_t first_candidate = 0;
  int32_t num_candidates = 0;
};

struct SamplerOutput {
  std::vector<SampledRow> rows;  // one per SamplingBatch row, in order
  std::vector<TopCandidate> candidates;

  // Resizes for `num_rows` rows and no candidates, keeping the capacity (no allocation once
  // warm).
  void Reset(size_t num_rows) {
    rows.resize(num_rows);
    candidates.clear();
  }
  [[nodiscard]] absl::Span<const TopCandidate> CandidatesOf(const SampledRow& row) const {
    return absl::MakeConstSpan(candidates.data() + row.first_candidate, row.num_candidates);
  }
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_SAMPLING_BATCH_H_
