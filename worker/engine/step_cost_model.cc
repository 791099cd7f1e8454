#include "worker/engine/step_cost_model.h"

#include <algorithm>
#include <cmath>

namespace pagellm {

void StepCostModel::Observe(int64_t tokens, double seconds) {
  static const double kDecay = std::exp2(-1.0 / kHalfLifeSteps);
  const auto n = static_cast<double>(tokens);
  s0_ = s0_ * kDecay + 1;
  sn_ = sn_ * kDecay + n;
  st_ = st_ * kDecay + seconds;
  snn_ = snn_ * kDecay + n * n;
  snt_ = snt_ * kDecay + n * seconds;
}

double StepCostModel::free_tokens() const {
  if (s0_ < 2) return prior_;
  const double mean_n = sn_ / s0_;
  const double var_n = snn_ / s0_ - mean_n * mean_n;
  // Sizes spread by less than a token say nothing about the slope.
  if (!(var_n >= 1.0)) return prior_;
  const double b = (snt_ / s0_ - mean_n * (st_ / s0_)) / var_n;
  const double a = st_ / s0_ - b * mean_n;
  if (!(b > 0)) return prior_;
  // No fixed cost within the noise of a percent of a step is none.
  if (!(a >= -0.01 * (st_ / s0_))) return prior_;
  return std::clamp(a / b, 0.0, kMaxFreeTokens);
}

bool DraftPays(double acceptance, int64_t known_tokens, double free_tokens) {
  const auto b = static_cast<double>(known_tokens);
  return acceptance * (free_tokens + b) > b;
}

}  // namespace pagellm
