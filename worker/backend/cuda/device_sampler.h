// DeviceSampler: the sampling half of the CUDA backend's Forward. Greedy rows without penalties
// -- the serving and benchmark default -- are sampled on the GPU (kernels/cuda/greedy_sample.h):
// only token ids and the requested logprobs come back. Every other row (temperature, top-k/p,
// min-p, penalties, beam candidates) is, for now, sampled by the reference sampler on the host
// over its logits row alone, copied back. Either way the answer is the CPU sampler's for the
// same logits.
//
// Not thread-safe: the engine thread calls Sample(). Buffers grow to the largest step, then are
// reused.
#ifndef PAGELLM_WORKER_BACKEND_CUDA_DEVICE_SAMPLER_H_
#define PAGELLM_WORKER_BACKEND_CUDA_DEVICE_SAMPLER_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cuda/greedy_sample.h"
#include "worker/backend/cpu/host_sampler.h"
#include "worker/backend/cuda/device_memory.h"
#include "worker/backend/sampling_batch.h"

namespace pagellm::cuda {

class DeviceSampler {
 public:
  DeviceSampler(int64_t vocab_size, cudaStream_t stream)
      : vocab_(vocab_size), stream_(stream), host_(vocab_size) {}
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;

  // Samples `sampling` from the first `num_logits` rows of `logits` (device, [rows][vocab] fp32,
  // written by work already enqueued on the stream); synchronizes the stream. Errors as
  // Sampler::SampleBatch (InvalidArgument for a row outside the logits); a row that cannot be
  // sampled fails alone, in its SampledRow::status.
  absl::Status Sample(const float* logits, int64_t num_logits, const SamplingBatch& sampling,
                      SamplerOutput* out);

  // Rows the last Sample() took to the device and to the host.
  [[nodiscard]] int64_t last_device_rows() const { return device_index_.size(); }
  [[nodiscard]] int64_t last_host_rows() const { return host_index_.size(); }

 private:
  // Grows the pinned and device buffers for `rows` rows and `suppressed` ids.
  absl::Status Reserve(int64_t rows, int64_t suppressed);

  const int64_t vocab_;
  cudaStream_t stream_;
  HostSampler host_;
  std::vector<kernels::cuda::GreedyRow> device_rows_;
  std::vector<int32_t> suppress_, device_index_, host_index_;
  std::vector<uint8_t> logits_row_needed_;
  std::vector<SamplingRow> host_batch_;
  SamplerOutput host_out_;
  int64_t row_capacity_ = 0, suppress_capacity_ = 0;
  PinnedBuffer rows_host_, suppress_host_, results_host_;
  DeviceBuffer rows_device_, suppress_device_, results_device_;
};

}  // namespace pagellm::cuda

#endif  // PAGELLM_WORKER_BACKEND_CUDA_DEVICE_SAMPLER_H_
