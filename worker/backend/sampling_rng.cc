#include "worker/backend/sampling_rng.h"

#include <random>

namespace pagellm {
namespace {

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

SamplingRng SamplingRng::ForRequest(const SamplingParams& params) {
  if (params.seed.has_value()) return SamplingRng(*params.seed);
  std::random_device device;
  const uint64_t hi = device();
  return SamplingRng((hi << 32) ^ device());
}

SamplingRng SamplingRng::ForSample(int32_t index) const {
  if (index == 0) return *this;
  return SamplingRng(Mix64(seed_ ^ Mix64(0xD1B54A32D192ED03ull * static_cast<uint64_t>(index))));
}

double SamplingRng::Uniform(uint64_t step) const {
  // splitmix64: state_i = Mix64(seed) + (i + 1) * golden gamma; output = Mix64(state_i).
  const uint64_t state = Mix64(seed_) + (step + 1) * 0x9E3779B97F4A7C15ull;
  return static_cast<double>(Mix64(state) >> 11) * 0x1.0p-53;
}

}  // namespace pagellm
