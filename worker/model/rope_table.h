// The rotary-embedding table of a Llama-family model: per position, head_dim / 2 (cos, sin)
// pairs, frequency i at pair i, with the config's RoPE scaling (Llama 3, linear) and GGUF's
// per-frequency divisors applied. Computed in double, stored as float. Shared by every backend,
// so they rotate by the same angles.
#ifndef PAGELLM_WORKER_MODEL_ROPE_TABLE_H_
#define PAGELLM_WORKER_MODEL_ROPE_TABLE_H_

#include <span>
#include <vector>

#include "worker/model/model_config.h"

namespace pagellm {

// [config.max_position_embeddings][head_dim] floats: cos, sin of position * inv_freq[i] at
// 2i, 2i + 1. `freq_factors` is empty or head_dim / 2 divisors (rope_freqs.weight).
// REQUIRES: config.Validate() is OK.
std::vector<float> RopeCosSinTable(const ModelConfig& config, std::span<const float> freq_factors);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_ROPE_TABLE_H_
