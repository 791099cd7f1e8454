// The canonical tensor list of a Llama-family config, and the checks every reader runs against
// it. The shard rules are Megatron's: Q/K/V and gate/up are column-parallel (split by output
// rows, with their biases), O and down are row-parallel (split by input columns), everything
// else is replicated.
#include "worker/model/model_checkpoint.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagellm {

std::string LlamaTensorName(int64_t layer, absl::string_view suffix) {
  return absl::StrCat("model.layers.", layer, ".", suffix);
}

std::vector<LlamaTensorSpec> LlamaTensorSpecs(const ModelConfig& c) {
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  std::vector<LlamaTensorSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {c.vocab_size, h}, ShardDim::kReplicated, false});
  specs.push_back({"rope_freqs.weight", {c.head_dim / 2}, ShardDim::kReplicated, true});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto add = [&](absl::string_view suffix, std::vector<int64_t> shape, ShardDim dim) {
      specs.push_back({LlamaTensorName(i, suffix), std::move(shape), dim, false});
    };
    add("input_layernorm.weight", {h}, ShardDim::kReplicated);
    add("self_attn.q_proj.weight", {q_dim, h}, ShardDim::kRows);
    add("self_attn.k_proj.weight", {kv_dim, h}, ShardDim::kRows);
    add("self_attn.v_proj.weight", {kv_dim, h}, ShardDim::kRows);
    if (c.attention_bias) {
      add("self_attn.q_proj.bias", {q_dim}, ShardDim::kRows);
      add("self_attn.k_proj.bias", {kv_dim}, ShardDim::kRows);
      add("self_attn.v_proj.bias", {kv_dim}, ShardDim::kRows);
    }
    add("self_attn.o_proj.weight", {h, q_dim}, ShardDim::kColumns);
    add("post_attention_layernorm.weight", {h}, ShardDim::kReplicated);
    add("mlp.gate_proj.weight", {inter, h}, ShardDim::kRows);
    add("mlp.up_proj.weight", {inter, h}, ShardDim::kRows);
    add("mlp.down_proj.weight", {h, inter}, ShardDim::kColumns);
  }
  specs.push_back({"model.norm.weight", {h}, ShardDim::kReplicated, false});
  specs.push_back(
      {"lm_head.weight", {c.vocab_size, h}, ShardDim::kReplicated, c.tie_word_embeddings});
  return specs;
}

absl::Status CheckLlamaTensors(const ModelCheckpoint& checkpoint) {
  RETURN_IF_ERROR(checkpoint.config.Validate());
  for (const LlamaTensorSpec& spec : LlamaTensorSpecs(checkpoint.config)) {
    const TensorView* t = checkpoint.tensors.Find(spec.name);
    if (t == nullptr) {
      if (spec.optional) continue;
      return absl::InvalidArgumentError(absl::StrCat("missing tensor ", spec.name));
    }
    if (t->shape != spec.shape) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", spec.name, " has shape ",
                                                     ShapeString(t->shape), ", expected ",
                                                     ShapeString(spec.shape)));
    }
    if (!GetGgmlTypeTraits(t->dtype).dequantizable) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", spec.name, ": unsupported type ",
                       std::string(GetGgmlTypeTraits(t->dtype).name)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> RankConfig(const ModelConfig& c, const ShardSpec& shard) {
  const int n = shard.world_size;
  if (n < 1 || shard.rank < 0 || shard.rank >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-parallel rank ", shard.rank, " of ", n, " does not exist"));
  }
  auto check = [n](const char* what, int64_t v) {
    return v % n == 0
               ? absl::OkStatus()
               : absl::InvalidArgumentError(absl::StrCat(
                     "tensor-parallel size ", n, " does not divide the model's ", v, " ", what));
  };
  RETURN_IF_ERROR(check("attention heads", c.num_heads));
  RETURN_IF_ERROR(check("KV heads", c.num_kv_heads));
  RETURN_IF_ERROR(check("intermediate size", c.intermediate_size));
  ModelConfig r = c;
  r.num_heads /= n;
  r.num_kv_heads /= n;
  r.intermediate_size /= n;
  return r;
}

ShardSpec VocabShard(int64_t vocab_size, const ShardSpec& shard) {
  if (shard.world_size > 1 && vocab_size % shard.world_size == 0) return shard;
  return ShardSpec{};
}

absl::StatusOr<TensorView> LlamaShard(const ModelCheckpoint& checkpoint, absl::string_view name,
                                      const ShardSpec& spec) {
  ASSIGN_OR_RETURN(const TensorView* t, checkpoint.tensors.Get(name));
  for (const LlamaTensorSpec& s : LlamaTensorSpecs(checkpoint.config)) {
    if (s.name != name) continue;
    absl::StatusOr<TensorView> shard = ShardOf(*t, spec, s.shard);
    if (!shard.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, ": ", shard.status().message()));
    }
    return shard;
  }
  return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " is not part of the model"));
}

}  // namespace pagellm
