// The rotary-embedding table of a Llama-family model: per position, head_dim / 2 (cos, sin)
// pairs, frequency i at pair i, with the config's RoPE scaling (Llama 3, linear) and GGUF's
// per-frequency divisors applied. Computed in double, stored as float. Shared by every backend,
// so they rotate by the same angles.
#ifndef PAGELLM_WORKER_MODEL_ROPE_TABLE_H_
#define PAGELLM_WORKER_MODEL_ROPE_TABLE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "worker/model/model_config.h"

namespace pagellm {

// The head_dim / 2 angular frequencies inv_freq[i], scaling and divisors applied.
// `freq_factors` is empty or head_dim / 2 divisors (rope_freqs.weight).
// REQUIRES: config.Validate() is OK.
std::vector<double> RopeInverseFrequencies(const ModelConfig& config,
                                           std::span<const float> freq_factors);

// The table's rows for `n` positions: out[t][2i], out[t][2i + 1] = cos, sin of
// positions[t] * inv_freq[i], as floats; bit-identical to RopeCosSinTable's rows. For a backend
// that computes the angles of a step's tokens instead of holding max_position rows (64 MB at
// 128K positions of head_dim 128). REQUIRES: out holds n * 2 * inv_freq.size() floats.
void RopeCosSinRows(std::span<const double> inv_freq, const int32_t* positions, int64_t n,
                    float* out);

// [config.max_position_embeddings][head_dim] floats: the rows of every position.
// REQUIRES: config.Validate() is OK.
std::vector<float> RopeCosSinTable(const ModelConfig& config, std::span<const float> freq_factors);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_ROPE_TABLE_H_
