#include "worker/backend/cpu/host_sampler.h"

#include <algorithm>

#include "common/status_macros.h"

namespace pagellm {

float* HostSampler::Logits(int64_t rows) {
  if (static_cast<int64_t>(logits_.size()) < rows * vocab_size_) logits_.resize(rows * vocab_size_);
  return logits_.data();
}

absl::Status HostSampler::Sample(int64_t rows, const SamplingBatch& sampling, SamplerOutput* out) {
  if (sampler_ == nullptr || !std::equal(sampling.eos_token_ids.begin(),
                                         sampling.eos_token_ids.end(), eos_.begin(), eos_.end())) {
    eos_.assign(sampling.eos_token_ids.begin(), sampling.eos_token_ids.end());
    ASSIGN_OR_RETURN(sampler_, Sampler::Create({.vocab_size = vocab_size_, .eos_token_ids = eos_}));
  }
  return sampler_->SampleBatch(absl::MakeConstSpan(Logits(rows), rows * vocab_size_), sampling,
                               out);
}

}  // namespace pagellm
