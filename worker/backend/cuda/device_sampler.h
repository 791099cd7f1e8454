// DeviceSampler: the sampling half of the CUDA backend's Forward. Every row is sampled on the
// GPU, and only token ids and the requested logprobs come back:
//   - greedy rows without penalties (the serving and benchmark default) by
//     kernels/cuda/greedy_sample.h;
//   - every other sampling row by kernels/cuda/sample.h: penalties and min_tokens suppression
//     write a penalized copy of the row first (the history is uploaded as (id, output count)
//     pairs built here in O(history)); the draw's u is SamplingRng::Uniform of the row's step,
//     computed here as the CPU sampler does.
//   - beam rows' top candidates by sample.h's LaunchBeamCandidates; only for a vocabulary over
//     kMaxBeamVocab are they chosen by the reference sampler on the host over their logits row
//     alone, copied back;
//   - scoring rows (prompt logprobs, off the decode path), rows with an allowed-tokens mask
//     (structured output, allowed_token_ids; built on the host anyway) or a logit bias by the
//     reference sampler on the host over their logits rows, copied back.
// Either way the answer is the CPU sampler's for the same logits (sample.h says where rounding
// may differ).
//
// Not thread-safe: the engine thread calls Sample(). Buffers grow to the largest step, then are
// reused.
#ifndef PAGELLM_WORKER_BACKEND_CUDA_DEVICE_SAMPLER_H_
#define PAGELLM_WORKER_BACKEND_CUDA_DEVICE_SAMPLER_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cuda/greedy_sample.h"
#include "kernels/cuda/sample.h"
#include "worker/backend/cpu/host_sampler.h"
#include "worker/backend/cuda/device_memory.h"
#include "worker/backend/penalty_history.h"
#include "worker/backend/sampling_batch.h"

namespace pagellm::cuda {

class DeviceSampler {
 public:
  DeviceSampler(int64_t vocab_size, cudaStream_t stream)
      : vocab_(vocab_size), stream_(stream), host_(vocab_size), history_ids_(vocab_size) {}
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;

  // Samples `sampling` from the first `num_logits` rows of `logits` (device, [rows][vocab] fp32,
  // written by work already enqueued on the stream); synchronizes the stream. Errors as
  // Sampler::SampleBatch (InvalidArgument for a row outside the logits); a row that cannot be
  // sampled fails alone, in its SampledRow::status.
  absl::Status Sample(const float* logits, int64_t num_logits, const SamplingBatch& sampling,
                      SamplerOutput* out);

  // Rows the last Sample() took to the device (either kernel) and to the host.
  [[nodiscard]] int64_t last_device_rows() const {
    return greedy_index_.size() + sample_index_.size() + beam_index_.size();
  }
  [[nodiscard]] int64_t last_host_rows() const { return host_index_.size(); }

 private:
  // Appends row's min_tokens suppression (EOS unless ignore_eos, stop tokens) to suppress_;
  // InvalidArgument for a stop token outside the vocabulary.
  absl::Status AddSuppressed(const SamplingRow& row, const absl::Span<const int32_t> eos);
  // Appends row's penalty history (PenaltyHistory) to history_; InvalidArgument for an id
  // outside the vocabulary.
  absl::Status AddHistory(const SamplingRow& row);
  // Lays out the step's inputs in the staging buffers and grows the buffers as needed.
  absl::Status Stage();

  const int64_t vocab_;
  cudaStream_t stream_;
  HostSampler host_;
  std::vector<kernels::cuda::GreedyRow> greedy_rows_;
  std::vector<kernels::cuda::SampleRow> sample_rows_;
  std::vector<kernels::cuda::PenaltyRow> penalty_rows_;
  std::vector<kernels::cuda::BeamRow> beam_rows_;
  std::vector<kernels::cuda::PenaltyEntry> history_;
  std::vector<int32_t> suppress_, greedy_index_, sample_index_, beam_index_, host_index_;
  int64_t num_candidates_ = 0;                            // the beam rows' candidates, in total
  std::vector<std::pair<int32_t, absl::Status>> failed_;  // rows refused before the device
  PenaltyHistory history_ids_;
  std::vector<uint8_t> logits_row_needed_;
  std::vector<SamplingRow> host_batch_;
  SamplerOutput host_out_;
  // Offsets into the staging buffers of the last Stage().
  int64_t greedy_at_ = 0, sample_at_ = 0, penalty_at_ = 0, history_at_ = 0, suppress_at_ = 0,
          beam_at_ = 0, staged_bytes_ = 0;
  // Offsets into the results buffers: the beam candidates' logprobs and ids.
  int64_t logprobs_at_ = 0, ids_at_ = 0, result_bytes_ = 0;
  PinnedBuffer staging_host_, results_host_;
  DeviceBuffer staging_device_, results_device_, work_;
};

}  // namespace pagellm::cuda

#endif  // PAGELLM_WORKER_BACKEND_CUDA_DEVICE_SAMPLER_H_
