// Test support: the sampling parameters most tests use.
#ifndef PAGELLM_WORKER_ENGINE_TESTING_SAMPLING_H_
#define PAGELLM_WORKER_ENGINE_TESTING_SAMPLING_H_

#include <cstdint>

#include "common/sampling/sampling_params.h"

namespace pagellm::testing {

// Greedy decoding of exactly `max_tokens` tokens (EOS ignored).
inline SamplingParams GreedyParams(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

}  // namespace pagellm::testing

#endif  // PAGELLM_WORKER_ENGINE_TESTING_SAMPLING_H_
