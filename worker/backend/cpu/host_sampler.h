// HostSampler: the sampling half of Backend::Forward for backends whose logits are in host memory
// (cpu, mock, the test fakes). It owns the logits buffer -- grown to the largest step seen, then
// reused -- and a Sampler for the engine's EOS ids, created on first use and again only if they
// change.
//
// Not thread-safe: one per backend, used by the engine thread.
#ifndef PAGELLM_WORKER_BACKEND_CPU_HOST_SAMPLER_H_
#define PAGELLM_WORKER_BACKEND_CPU_HOST_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "worker/backend/cpu/sampler.h"
#include "worker/backend/sampling_batch.h"

namespace pagellm {

class HostSampler {
 public:
  explicit HostSampler(int64_t vocab_size) : vocab_size_(vocab_size) {}
  HostSampler(const HostSampler&) = delete;
  HostSampler& operator=(const HostSampler&) = delete;

  // Room for `rows` logits rows of vocab_size floats; valid until the next call.
  float* Logits(int64_t rows);
  // Samples `sampling` from the first `rows` rows of Logits(). Errors as Sampler::Create and
  // Sampler::SampleBatch.
  absl::Status Sample(int64_t rows, const SamplingBatch& sampling, SamplerOutput* out);

 private:
  const int64_t vocab_size_;
  std::vector<float> logits_;
  std::unique_ptr<Sampler> sampler_;
  std::vector<int32_t> eos_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_CPU_HOST_SAMPLER_H_
