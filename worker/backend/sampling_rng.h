// SamplingRng: a request's random stream, counter-based. The uniform draw for output position
// `step` is a pure function of (seed, step) -- splitmix64 seeded with the request seed and jumped
// to `step` -- so a seeded request produces the same tokens whatever else shares its batch, and
// replaying a step (preemption by recompute) replays its draw. Every sampler implementation
// (CPU, GPU) draws through this function so that they agree. A trivially copyable value;
// thread-safe.
#ifndef PAGELLM_WORKER_BACKEND_SAMPLING_RNG_H_
#define PAGELLM_WORKER_BACKEND_SAMPLING_RNG_H_

#include <cstdint>

#include "common/sampling/sampling_params.h"

namespace pagellm {

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

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_SAMPLING_RNG_H_
