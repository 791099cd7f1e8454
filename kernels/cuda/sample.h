// Sampling on the GPU for the rows greedy_sample.h does not take: penalties, min_tokens
// suppression, temperature, top-k, top-p, min-p and one draw with a uniform the host computed
// (SamplingRng::Uniform, so that a seeded request draws the same u on every backend and in any
// batch). The semantics are worker/backend/cpu/sampler.h's:
//   penalties -> suppression -> greedy argmax (temperature 0), or p_i = exp((x_i - max) / T) ->
//   top-k -> top-p -> min-p -> the first survivor, in id order, whose cumulative p exceeds
//   u * (the survivors' total p).
// Rankings are by (logit desc, id asc), so the truncated sets equal a full sort's. Masses are
// summed in 2^-40 fixed point (deterministic whatever the thread schedule; p below 2^-41 counts
// as 0), so the chosen token equals the CPU sampler's except when u falls within rounding of a
// cumulative boundary. Logprobs are of the raw row, as greedy_sample.h's.
//
// Launchers never allocate and return cudaError_t. All pointers are device pointers.
#ifndef PAGELLM_KERNELS_CUDA_SAMPLE_H_
#define PAGELLM_KERNELS_CUDA_SAMPLE_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/greedy_sample.h"

namespace pagellm::kernels::cuda {

// A row whose logits change before sampling: work row `work_row` of `work` becomes logits row
// `logits_row` with penalties applied to the ids in history[history_begin, + history_count)
// (each id at most once) and then suppress_ids[suppress_begin, + suppress_count) set to -inf.
struct PenaltyRow {
  int32_t logits_row = 0;
  int32_t work_row = 0;
  int32_t history_begin = 0;
  int32_t history_count = 0;
  int32_t suppress_begin = 0;
  int32_t suppress_count = 0;
  float repetition = 1.0f;  // x > 0 ? x / r : x * r for every history id
  float frequency = 0.0f;   // minus frequency * output_count
  float presence = 0.0f;    // minus presence if output_count > 0
};

// A token of a row's history: in the prompt (read only with a repetition penalty) or the
// output, `output_count` times in the output.
struct PenaltyEntry {
  int32_t id = 0;
  int32_t output_count = 0;
};

struct SampleRow {
  int32_t logits_row = 0;     // the raw row: logprobs, and the NaN/+inf check
  int32_t work_row = -1;      // >= 0: sample from this row of `work` (penalized) instead
  float temperature = 0.0f;   // 0: greedy (the caller maps SamplingParams::IsGreedy() to 0)
  int32_t top_k = 0;          // <= 0 or >= vocab: off
  float top_p = 1.0f;         // (0, 1]; 1: off
  float min_p = 0.0f;         // [0, 1]; 0: off
  int32_t num_logprobs = -1;  // as GreedyRow
  double u = 0.0;             // the draw, in [0, 1)
};

// A beam-search row: the num_candidates most likely tokens of the raw row (logit desc, id asc),
// skipping suppress_ids[suppress_begin, + suppress_count), with log_softmax of the raw row in
// double precision -- sampler.h's Sampler::AppendTopCandidates. Its candidates go to
// ids/logprobs[out_begin, + num_candidates).
struct BeamRow {
  int32_t logits_row = 0;
  int32_t suppress_begin = 0;
  int32_t suppress_count = 0;
  int32_t num_candidates = 0;  // 1 .. kMaxBeamCandidates
  int32_t out_begin = 0;
};

inline constexpr int kMaxBeamCandidates = 512;        // 2 x kMaxParallelSamples
inline constexpr int64_t kMaxBeamVocab = 320 * 1024;  // the suppression bitmap: 40 KiB of smem

// For each of n rows: work row rows[i].work_row = logits row rows[i].logits_row, penalized and
// suppressed. REQUIRES: ids inside the vocabulary; distinct work rows.
cudaError_t LaunchApplyPenalties(const float* logits, int64_t vocab, const PenaltyRow* rows,
                                 int64_t n, const PenaltyEntry* history,
                                 const int32_t* suppress_ids, float* work, cudaStream_t stream);

// For each of n rows: out[i], statuses as LaunchGreedySample (kNanOrInf for the raw row;
// kNoFiniteLogit when the sampled row's maximum is not finite). `work` may be null when no row
// reads it.
cudaError_t LaunchSample(const float* logits, const float* work, int64_t vocab,
                         const SampleRow* rows, int64_t n, GreedyResult* out, cudaStream_t stream);

// For each of n beam rows: its candidates, best first. The row's raw logits are not checked for
// NaN (as the CPU's). REQUIRES: vocab <= kMaxBeamVocab, suppressed ids inside the vocabulary,
// num_candidates + suppress_count <= vocab.
cudaError_t LaunchBeamCandidates(const float* logits, int64_t vocab, const BeamRow* rows, int64_t n,
                                 const int32_t* suppress_ids, int32_t* ids, double* logprobs,
                                 cudaStream_t stream);

}  // namespace pagellm::kernels::cuda

#endif  // PAGELLM_KERNELS_CUDA_SAMPLE_H_
