// Hugging Face `config.json` -> ModelConfig for the Llama family.
//
// Accepted architectures (the first entry of "architectures", or "model_type" when that list is
// absent): LlamaForCausalLM / "llama", MistralForCausalLM / "mistral" (both map to
// architecture "llama"), Qwen2ForCausalLM / "qwen2" (architecture "qwen2", attention_bias).
//
// Required integers: vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads. Optional fields take the defaults of the matching transformers config
// class: num_key_value_heads (= num_attention_heads; 8 for Mistral), head_dim (= hidden_size /
// num_attention_heads; null allowed), max_position_embeddings (Llama 2048, Mistral 131072, Qwen2
// 32768), rms_norm_eps (1e-6), rope_theta (10000), tie_word_embeddings (false), attention_bias
// (Llama only; false). rope_scaling may be null or {"rope_type"|"type": "default" | "linear" |
// "llama3", ...}; llama3 requires factor, low_freq_factor, high_freq_factor and
// original_max_position_embeddings. hidden_act, when present, must be "silu"; mlp_bias, when
// present, must be false.
//
// Sliding-window attention is not implemented. When a config enables it (Mistral's
// "sliding_window", Qwen2's "use_sliding_window") max_position_embeddings is clamped to the
// window, where full attention gives the same results.
//
// Thread-safe: pure functions.
#ifndef PAGELLM_WORKER_MODEL_HF_CONFIG_H_
#define PAGELLM_WORKER_MODEL_HF_CONFIG_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "worker/model/model_config.h"

namespace pagellm {

// Parses the text of a config.json. Returns a config that passed ModelConfig::Validate();
// InvalidArgument naming the field for invalid JSON, a wrong type, an unsupported architecture
// or feature, or a value Validate() rejects.
absl::StatusOr<ModelConfig> ParseHfConfig(std::string_view json_text);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_HF_CONFIG_H_
