#include "worker/model/rope_table.h"

#include <cmath>

namespace pagellm {

std::vector<float> RopeCosSinTable(const ModelConfig& c, std::span<const float> freq_factors) {
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
  std::vector<float> table(c.max_position_embeddings * c.head_dim);
  for (int64_t p = 0; p < c.max_position_embeddings; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * inv_freq[i];
      table[p * c.head_dim + 2 * i] = static_cast<float>(std::cos(a));
      table[p * c.head_dim + 2 * i + 1] = static_cast<float>(std::sin(a));
    }
  }
  return table;
}

}  // namespace pagellm
