// Greedy sampling on the GPU: the chosen token of each row and, when asked, its logprob, rank
// and the top-N logprobs of the raw distribution -- so that only ids and a few floats leave the
// device. The semantics are worker/backend/cpu/sampler.h's for a greedy row without penalties:
// argmax with ties to the lower id, the row's suppressed ids (EOS and stop tokens before
// min_tokens) at -inf; logprobs are log_softmax of the raw row, rank = 1 + the count of strictly
// larger raw logits, top-N most likely first with ties to the lower id.
//
// Launchers never allocate and return cudaError_t. All pointers are device pointers.
#ifndef PAGELLM_KERNELS_CUDA_GREEDY_SAMPLE_H_
#define PAGELLM_KERNELS_CUDA_GREEDY_SAMPLE_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace pagellm::kernels::cuda {

inline constexpr int kMaxTopLogprobs = 20;

struct GreedyRow {
  int32_t logits_row = 0;
  int32_t suppress_begin = 0;  // the row's suppressed ids: suppress_ids[begin, begin + count)
  int32_t suppress_count = 0;
  int32_t num_logprobs = -1;  // -1: none; else 0 .. kMaxTopLogprobs top entries
};

struct GreedyResult {
  enum Status : int32_t { kOk = 0, kNanOrInf = 1, kNoFiniteLogit = 2 };
  int32_t status = kOk;
  int32_t token = -1;
  float logprob = 0.0f;
  int32_t rank = 0;
  int32_t num_top = 0;
  int32_t top_ids[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};

// For each of `n` rows: out[i] from logits row rows[i].logits_row of `logits` ([rows][vocab]
// fp32). A row holding NaN or +inf gets kNanOrInf; one with every unsuppressed logit -inf gets
// kNoFiniteLogit. REQUIRES: suppress ids inside the vocabulary.
cudaError_t LaunchGreedySample(const float* logits, int64_t vocab, const GreedyRow* rows, int64_t n,
                               const int32_t* suppress_ids, GreedyResult* out, cudaStream_t stream);

}  // namespace pagellm::kernels::cuda

#endif  // PAGELLM_KERNELS_CUDA_GREEDY_SAMPLE_H_
