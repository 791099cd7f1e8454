// Test support: a Llama-family shape small enough to build in microseconds (vocabulary 64,
// hidden 32, 4 heads of 8 with 2 KV heads, intermediate 64), and random checkpoints of it.
#ifndef PAGELLM_WORKER_MODEL_TESTING_TINY_MODEL_H_
#define PAGELLM_WORKER_MODEL_TESTING_TINY_MODEL_H_

#include <cstdint>
#include <memory>

#include "worker/model/model_checkpoint.h"

namespace pagellm::testing {

inline ModelConfig TinyLlamaConfig(int64_t layers = 2, bool attention_bias = false,
                                   bool tied = true) {
  ModelConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_layers = layers;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 128;
  c.attention_bias = attention_bias;
  c.tie_word_embeddings = tied;
  return c;
}

// Random weights of `config` in `type` (MakeDummyCheckpoint); null when that fails.
inline std::shared_ptr<const ModelCheckpoint> TinyCheckpoint(GgmlType type,
                                                             const ModelConfig& config,
                                                             uint64_t seed = 1) {
  absl::StatusOr<std::unique_ptr<ModelCheckpoint>> c = MakeDummyCheckpoint(config, type, seed);
  if (!c.ok()) return nullptr;
  return std::shared_ptr<const ModelCheckpoint>(*std::move(c));
}

}  // namespace pagellm::testing

#endif  // PAGELLM_WORKER_MODEL_TESTING_TINY_MODEL_H_
