// LlamaWeights from a Hugging Face checkpoint (model.layers.N.self_attn.q_proj, ...). Tensors
// are F32, F16 or BF16 and are converted to fp32; HF stores Q/K in the rotate-half layout.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/dequant.h"
#include "worker/model/hf_checkpoint.h"
#include "worker/model/llama_weights.h"
#include "worker/model/llama_weights_common.h"

namespace pagellm {
namespace {

absl::StatusOr<std::vector<float>> Load(const HfCheckpoint& ckpt, const std::string& name,
                                        std::vector<int64_t> shape) {
  ASSIGN_OR_RETURN(const SafetensorsTensor* t, ckpt.GetFloatTensor(name));
  if (t->shape != shape) {
    std::string want, got;
    for (int64_t d : shape) absl::StrAppend(&want, d, ",");
    for (int64_t d : t->shape) absl::StrAppend(&got, d, ",");
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " has shape [", got, "], expected [", want, "]"));
  }
  GgmlType type = GgmlType::kF32;
  if (t->dtype == SafetensorsDtype::kF16) type = GgmlType::kF16;
  if (t->dtype == SafetensorsDtype::kBF16) type = GgmlType::kBF16;
  std::vector<float> out(t->num_elements);
  RETURN_IF_ERROR(kernels::DequantizeRow(type, t->data, out.data(), t->num_elements));
  return out;
}

absl::StatusOr<Matrix> LoadMatrix(const HfCheckpoint& ckpt, const std::string& name,
                                  int64_t n_out, int64_t n_in, bool bias) {
  Matrix m;
  m.type = GgmlType::kF32;
  m.n_out = n_out;
  m.n_in = n_in;
  ASSIGN_OR_RETURN(m.f32, Load(ckpt, name + ".weight", {n_out, n_in}));
  if (bias) {
    ASSIGN_OR_RETURN(m.bias, Load(ckpt, name + ".bias", {n_out}));
  }
  return m;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaWeights>> LoadLlamaFromHf(std::shared_ptr<HfCheckpoint> ckpt) {
  auto w = std::make_unique<LlamaWeights>();
  w->config = ckpt->config();
  const ModelConfig& c = w->config;
  RETURN_IF_ERROR(c.Validate());
  w->rope_neox = true;
  w->source = ckpt;
  ASSIGN_OR_RETURN(std::vector<float> embd,
                   Load(*ckpt, "model.embed_tokens.weight", {c.vocab_size, c.hidden_size}));
  Embedding& e = w->token_embedding;
  e.type = GgmlType::kF32;
  e.rows = c.vocab_size;
  e.dim = c.hidden_size;
  e.row_bytes = c.hidden_size * sizeof(float);
  e.owned.resize(embd.size() * sizeof(float));
  std::memcpy(e.owned.data(), embd.data(), e.owned.size());
  e.data = e.owned.data();

  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  const bool b = c.attention_bias;
  w->layers.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LlamaLayerWeights& l = w->layers[i];
    const std::string p = absl::StrCat("model.layers.", i, ".");
    ASSIGN_OR_RETURN(l.attn_norm, Load(*ckpt, p + "input_layernorm.weight", {c.hidden_size}));
    ASSIGN_OR_RETURN(l.ffn_norm, Load(*ckpt, p + "post_attention_layernorm.weight", {c.hidden_size}));
    ASSIGN_OR_RETURN(l.wq, LoadMatrix(*ckpt, p + "self_attn.q_proj", q_dim, c.hidden_size, b));
    ASSIGN_OR_RETURN(l.wk, LoadMatrix(*ckpt, p + "self_attn.k_proj", kv_dim, c.hidden_size, b));
    ASSIGN_OR_RETURN(l.wv, LoadMatrix(*ckpt, p + "self_attn.v_proj", kv_dim, c.hidden_size, b));
    ASSIGN_OR_RETURN(l.wo, LoadMatrix(*ckpt, p + "self_attn.o_proj", c.hidden_size, q_dim, false));
    ASSIGN_OR_RETURN(l.w_gate, LoadMatrix(*ckpt, p + "mlp.gate_proj", c.intermediate_size, c.hidden_size, false));
    ASSIGN_OR_RETURN(l.w_up, LoadMatrix(*ckpt, p + "mlp.up_proj", c.intermediate_size, c.hidden_size, false));
    ASSIGN_OR_RETURN(l.w_down, LoadMatrix(*ckpt, p + "mlp.down_proj", c.hidden_size, c.intermediate_size, false));
  }
  ASSIGN_OR_RETURN(w->output_norm, Load(*ckpt, "model.norm.weight", {c.hidden_size}));
  if (!c.tie_word_embeddings || ckpt->Find("lm_head.weight") != nullptr) {
    ASSIGN_OR_RETURN(w->lm_head, LoadMatrix(*ckpt, "lm_head", c.vocab_size, c.hidden_size, false));
  }
  RETURN_IF_ERROR(internal::FinishWeights(w.get()));
  return w;
}

}  // namespace pagellm
