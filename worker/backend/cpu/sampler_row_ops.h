// Vectorized passes over one logits row, the sampler's O(vocab) work. Each function is
// compiled for AVX2 and for baseline x86-64 and picks one at load time. Pure functions of their
// arguments: thread-safe. Pointers are borrowed for the call; n may be any size >= 0.
#ifndef PAGELLM_WORKER_BACKEND_CPU_SAMPLER_ROW_OPS_H_
#define PAGELLM_WORKER_BACKEND_CPU_SAMPLER_ROW_OPS_H_

#include <cstdint>

namespace pagellm::row_ops {

// ExpBlocks sums probabilities per block of this many ids.
inline constexpr int64_t kBlock = 512;
// Levels of key = (max - logit) / T (probability e^-key) at which ExpBlocks measures mass.
inline constexpr int kNumKeyLevels = 4;
inline constexpr float kKeyLevels[kNumKeyLevels] = {2.0f, 4.0f, 8.0f, 16.0f};

struct RowPeak {
  float value;   // The largest value; -inf when there is none.
  int32_t id;    // Lowest index holding it; -1 when every value is -inf (or n == 0).
  bool has_nan;  // Some value is NaN (NaNs are otherwise ignored).
};
RowPeak ScanPeak(const float* x, int64_t n);

// exp(x) for x <= 0 (-inf gives 0), relative error below 2e-7; 0 for x < -87.
// The scalar form of what ExpBlocks computes per element.
float ExpNonPositive(float x);

// p[i] = exp((w[i] - max) * inv_t) and block_sums[b] = sum of p[i] over
// [b * kBlock, (b + 1) * kBlock), for ceil(n / kBlock) blocks. If level_mass is not null, also
// level_mass[L] = sum of p[i] over the i with key (max - w[i]) * inv_t < kKeyLevels[L].
// REQUIRES: w[i] <= max (or -inf), inv_t > 0.
void ExpBlocks(const float* w, int64_t n, float max, float inv_t, float* p, double* block_sums,
               double* level_mass);

// Sets p[i] = 0 where p[i] < min_p and recomputes block_sums as ExpBlocks does.
void ZeroBelow(float* p, int64_t n, float min_p, double* block_sums);

// Writes the i in [0, n) with (max - w[i]) * inv_t < level to out in increasing order; returns
// how many. REQUIRES: out has room for n.
int32_t CollectBelowKey(const float* w, int32_t n, float max, float inv_t, float level,
                        int32_t* out);

// Returns the first i in [from, n) with x[i] > threshold, or n.
int64_t FindNextAbove(const float* x, int64_t from, int64_t n, float threshold);

// Returns how many x[i] > threshold.
int32_t CountGreater(const float* x, int64_t n, float threshold);

}  // namespace pagellm::row_ops

#endif  // PAGELLM_WORKER_BACKEND_CPU_SAMPLER_ROW_OPS_H_
