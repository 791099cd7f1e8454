#include "worker/model/rope_table.h"

#include <cmath>

namespace pagellm {

std::vector<double> RopeInverseFrequencies(const ModelConfig& c,
                                           std::span<const float> freq_factors) {
  const int64_t half = c.head_dim / 2;
  std::vector<double> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) {
    double f = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / c.head_dim);
    const RopeScaling& s = c.rope_scaling;
    if (s.type == RopeScaling::Type::kLlama3) {
      const double pi = 3.14159265358979323846;
      const double wavelen = 2 * pi / f;
      const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
      const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    } else if (s.type == RopeScaling::Type::kLinear) {
      f /= s.factor;
    }
    if (!freq_factors.empty()) f /= freq_factors[i];
    inv_freq[i] = f;
  }
  return inv_freq;
}

void RopeCosSinRows(std::span<const double> inv_freq, const int32_t* positions, int64_t n,
                    float* out) {
  const auto half = static_cast<int64_t>(inv_freq.size());
  for (int64_t t = 0; t < n; ++t, out += 2 * half) {
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(positions[t]) * inv_freq[i];
      out[2 * i] = static_cast<float>(std::cos(a));
      out[2 * i + 1] = static_cast<float>(std::sin(a));
    }
  }
}

std::vector<float> RopeCosSinTable(const ModelConfig& c, std::span<const float> freq_factors) {
  const std::vector<double> inv_freq = RopeInverseFrequencies(c, freq_factors);
  std::vector<float> table(c.max_position_embeddings * c.head_dim);
  for (int64_t p = 0; p < c.max_position_embeddings; ++p) {
    const auto pos = static_cast<int32_t>(p);
    RopeCosSinRows(inv_freq, &pos, 1, table.data() + p * c.head_dim);
  }
  return table;
}

}  // namespace pagellm
