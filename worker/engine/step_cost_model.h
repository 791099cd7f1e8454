// StepCostModel: what a step costs as a function of its tokens, learned from the steps the
// engine runs: time = a + b * tokens, fitted by exponentially weighted least squares over recent
// steps (half-life kHalfLifeSteps). The engine uses its ratio a / b -- how many tokens' work a
// step's fixed cost is worth (reading the weights once, launching, sampling) -- to decide when
// a drafted token is worth computing: in a step of B known tokens, one whose chance of being
// confirmed is p pays when p > B / (a / b + B). On a CPU a / b is a few tokens (the matrix
// kernels are compute-bound from a handful of rows on), on a GPU tens to hundreds.
//
// Until the observed steps vary enough in size to fit a line (or when the fit is not a cost:
// b <= 0 or a < 0), free_tokens() is the prior. Not thread-safe; O(1) per observation.
#ifndef PAGELLM_WORKER_ENGINE_STEP_COST_MODEL_H_
#define PAGELLM_WORKER_ENGINE_STEP_COST_MODEL_H_

#include <cstdint>

namespace pagellm {

class StepCostModel {
 public:
  static constexpr double kHalfLifeSteps = 256;

  explicit StepCostModel(double prior_free_tokens) : prior_(prior_free_tokens) {}

  void Observe(int64_t tokens, double seconds);
  // a / b of the fit, in [0, kMaxFreeTokens]; the prior without a fit.
  [[nodiscard]] double free_tokens() const;

  static constexpr double kMaxFreeTokens = 4096;

 private:
  double prior_;
  // Decayed sums of 1, n, t, n^2, n*t.
  double s0_ = 0, sn_ = 0, st_ = 0, snn_ = 0, snt_ = 0;
};

// True when drafting a token confirmed with probability `acceptance` raises a step's tokens per
// second: acceptance > known_tokens / (free_tokens + known_tokens). With r = free_tokens, a step
// of B tokens takes b (r + B); D drafted tokens add b D and, on average, acceptance D tokens.
bool DraftPays(double acceptance, int64_t known_tokens, double free_tokens);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_STEP_COST_MODEL_H_
