// ModelConfig: the shape and hyper-parameters of a Llama-family decoder (Llama 2/3, Mistral,
// Qwen2, SmolLM2), whatever file format it came from. Plain data; thread-compatible.
#ifndef PAGELLM_WORKER_MODEL_MODEL_CONFIG_H_
#define PAGELLM_WORKER_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace pagellm {

struct RopeScaling {
  enum class Type { kNone, kLlama3, kLinear };
  Type type = Type::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;                     // llama3
  float high_freq_factor = 4.0f;                    // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  std::string architecture = "llama";  // "llama" or "qwen2"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;                 // hidden_size / num_heads unless given
  int64_t max_position_embeddings = 0;  // context length
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // Qwen2: q/k/v projections carry a bias

  // OK when every field is positive and consistent (heads divide, head_dim even, caps on
  // sizes so that products cannot overflow). InvalidArgument naming the field otherwise.
  absl::Status Validate() const;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_MODEL_CONFIG_H_
