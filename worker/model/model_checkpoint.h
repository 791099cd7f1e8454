// ModelCheckpoint: a Llama-family decoder (Llama 2/3, Mistral, Qwen2, SmolLM2) as read from any
// source -- a GGUF file, a Hugging Face directory, or random weights -- in one backend-neutral
// form: its config, the RoPE layout of its Q/K rows, and its tensors under canonical names (the
// Hugging Face ones), each in the element type the file holds. Backends build their weights from
// it; the readers (ReadGgufCheckpoint, ReadHfCheckpoint, MakeDummyCheckpoint) check every tensor
// the config implies before returning one (CheckLlamaTensors).
//
// Canonical names, for layer i (LlamaTensorName):
//   model.embed_tokens.weight                       [vocab, hidden]
//   model.layers.i.input_layernorm.weight           [hidden]
//   model.layers.i.self_attn.{q,k,v}_proj.weight    [heads|kv_heads * head_dim, hidden]
//   model.layers.i.self_attn.{q,k,v}_proj.bias      [...] when config.attention_bias (Qwen2)
//   model.layers.i.self_attn.o_proj.weight          [hidden, heads * head_dim]
//   model.layers.i.post_attention_layernorm.weight  [hidden]
//   model.layers.i.mlp.{gate,up}_proj.weight        [intermediate, hidden]
//   model.layers.i.mlp.down_proj.weight             [hidden, intermediate]
//   model.norm.weight                               [hidden]
//   lm_head.weight                                  [vocab, hidden], absent when tied
//   rope_freqs.weight                               [head_dim / 2], optional (GGUF Llama 3)
//
// Immutable once built; thread-safe for concurrent reads.
#ifndef PAGELLM_WORKER_MODEL_MODEL_CHECKPOINT_H_
#define PAGELLM_WORKER_MODEL_MODEL_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ggml_type.h"
#include "worker/model/model_config.h"
#include "worker/model/tensor_map.h"

namespace pagellm {

class GgufFile;
class HfCheckpoint;

struct ModelCheckpoint {
  ModelConfig config;
  // True for the Hugging Face (rotate-half) RoPE layout of Q/K rows, false for GGUF llama's
  // interleaved pairs (llama.cpp permutes the rows at conversion).
  bool rope_neox = true;
  TensorMap tensors;
  // Set for random weights a backend generates itself (--load-format dummy on a GPU, where
  // gigabytes made on the host would only be copied over): `tensors` is then empty and
  // LlamaTensorSpecs(config) gives the shapes. Matrices are uniform in +-1/sqrt(n_in) of
  // `generated->type`, norms 1, biases 0.01 (as MakeDummyCheckpoint), drawn from `seed`.
  struct Generated {
    GgmlType type = GgmlType::kBF16;
    uint64_t seed = 0;
  };
  std::optional<Generated> generated;
  // Gives the host pages of tensor bytes [data, data + bytes) back to the OS when they are a
  // file mapping (MappedFile::DropPages); they are read again if touched. For a backend that
  // keeps its own copy (the CPU backend's packed matrices), so the model is not resident twice.
  // Empty (nothing to release) for checkpoints in owned memory.
  std::function<void(const uint8_t* data, uint64_t bytes)> drop_pages;
};

// One tensor a config implies: its canonical name, shape, and how tensor parallelism splits it.
struct LlamaTensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  ShardDim shard = ShardDim::kReplicated;
  bool optional = false;
};

// Every tensor `config` implies, in load order (embedding, layers, norm, head).
std::vector<LlamaTensorSpec> LlamaTensorSpecs(const ModelConfig& config);

// "model.layers.3.self_attn.q_proj.weight" for (3, "self_attn.q_proj.weight").
std::string LlamaTensorName(int64_t layer, absl::string_view suffix);

// Checks that every tensor the config implies is present with its shape and a known element
// type (float or GGML blocks that kernels/cpu/dequant or a backend can read), and that the
// optional ones are well-formed when present. InvalidArgument naming the tensor otherwise.
absl::Status CheckLlamaTensors(const ModelCheckpoint& checkpoint);

// The slice of tensor `name` that `spec.rank` holds (see ShardOf). InvalidArgument when the name
// is not one the config implies or the split does not divide it.
absl::StatusOr<TensorView> LlamaShard(const ModelCheckpoint& checkpoint, absl::string_view name,
                                      const ShardSpec& spec);

// The dimensions one rank of `shard` computes: heads, KV heads and intermediate size divided by
// the world size (whole heads per rank, as vLLM requires); hidden size and vocabulary stay.
// InvalidArgument for a rank outside the group or a world size that does not divide them.
absl::StatusOr<ModelConfig> RankConfig(const ModelConfig& config, const ShardSpec& shard);

// The split of the vocabulary (the embedding's and output projection's rows) for `shard`:
// `shard` itself when its world size divides `vocab_size`, else {0, 1} (every rank holds all of
// it). A rank holds rows [VocabBegin, VocabBegin + vocab_size / world_size) of it.
ShardSpec VocabShard(int64_t vocab_size, const ShardSpec& shard);
inline int64_t VocabBegin(int64_t vocab_size, const ShardSpec& vocab_shard) {
  return vocab_shard.rank * (vocab_size / vocab_shard.world_size);
}

// Reads the model config from GGUF metadata (`general.architecture` llama or qwen2).
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf);

// The checkpoint of a mapped GGUF file: tensors renamed to the canonical names and their shapes
// given outermost first; the file stays mapped while the checkpoint lives.
absl::StatusOr<std::unique_ptr<ModelCheckpoint>> ReadGgufCheckpoint(
    std::shared_ptr<const GgufFile> gguf);

// The checkpoint of a Hugging Face directory (F32, F16 or BF16 tensors, kept as they are).
// Unimplemented for tensors of other dtypes.
absl::StatusOr<std::unique_ptr<ModelCheckpoint>> ReadHfCheckpoint(
    std::shared_ptr<const HfCheckpoint> checkpoint);

// Random weights of the given shape, for benchmarking large shapes without files. `type` is the
// matrices' type: kQ4_0, kQ4_1, kQ8_0, kF16, kBF16 or kF32 (norms are fp32). Deterministic in
// `seed`; values keep activations finite through many layers.
absl::StatusOr<std::unique_ptr<ModelCheckpoint>> MakeDummyCheckpoint(const ModelConfig& config,
                                                                     GgmlType type, uint64_t seed);

// The same shape with no bytes on the host: ModelCheckpoint::generated set, for a backend that
// generates the weights where they live. `type` kF16 or kBF16 (InvalidArgument otherwise).
absl::StatusOr<std::unique_ptr<ModelCheckpoint>> MakeGeneratedCheckpoint(const ModelConfig& config,
                                                                         GgmlType type,
                                                                         uint64_t seed);

// Named shapes for --load-format dummy: "llama-3-8b", "llama-2-7b", "llama-2-13b",
// "mistral-7b", "qwen2-7b", "smollm2-135m". NotFound for other names.
absl::StatusOr<ModelConfig> DummyModelPreset(const std::string& name);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_MODEL_CHECKPOINT_H_
