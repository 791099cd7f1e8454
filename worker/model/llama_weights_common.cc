#include "worker/model/llama_weights_common.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/quant_matmul.h"

namespace pagellm::internal {

absl::Status CheckMatrix(const Matrix& w, int64_t n_out, int64_t n_in, const std::string& name) {
  if (w.n_out != n_out || w.n_in != n_in) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " has shape [", w.n_out, ", ",
                                                   w.n_in, "], expected [", n_out, ", ", n_in,
                                                   "]"));
  }
  if (w.type == GgmlType::kF32) {
    if (static_cast<int64_t>(w.f32.size()) != n_out * n_in)
      return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": missing fp32 data"));
  } else if (!kernels::IsQuantMatmulType(w.type) || w.blocks == nullptr || n_in % 32 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": unusable matrix type"));
  }
  if (!w.bias.empty() && static_cast<int64_t>(w.bias.size()) != n_out)
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": bias size mismatch"));
  return absl::OkStatus();
}

namespace {

// Repacks a quantized matrix for the kernels (no-op for fp32).
absl::Status Pack(Matrix* m) {
  if (m->type == GgmlType::kF32) return absl::OkStatus();
  ASSIGN_OR_RETURN(m->packed, kernels::PackQuantMatrix(m->type, m->blocks, m->n_out, m->n_in));
  return absl::OkStatus();
}

}  // namespace

absl::Status FinishWeights(LlamaWeights* w) {
  const ModelConfig& c = w->config;
  RETURN_IF_ERROR(c.Validate());
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  if (w->token_embedding.rows != c.vocab_size || w->token_embedding.dim != c.hidden_size)
    return absl::InvalidArgumentError("token embedding shape does not match the config");
  if (static_cast<int64_t>(w->layers.size()) != c.num_layers)
    return absl::InvalidArgumentError("layer count does not match the config");
  if (static_cast<int64_t>(w->output_norm.size()) != c.hidden_size)
    return absl::InvalidArgumentError("output norm size does not match the config");
  if (!w->rope_freq_factors.empty() &&
      static_cast<int64_t>(w->rope_freq_factors.size()) != c.head_dim / 2)
    return absl::InvalidArgumentError("rope_freqs size does not match head_dim / 2");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const LlamaLayerWeights& l = w->layers[i];
    const std::string p = absl::StrCat("layer ", i, " ");
    if (static_cast<int64_t>(l.attn_norm.size()) != c.hidden_size ||
        static_cast<int64_t>(l.ffn_norm.size()) != c.hidden_size)
      return absl::InvalidArgumentError(p + "norm size does not match the config");
    RETURN_IF_ERROR(CheckMatrix(l.wq, q_dim, c.hidden_size, p + "q"));
    RETURN_IF_ERROR(CheckMatrix(l.wk, kv_dim, c.hidden_size, p + "k"));
    RETURN_IF_ERROR(CheckMatrix(l.wv, kv_dim, c.hidden_size, p + "v"));
    RETURN_IF_ERROR(CheckMatrix(l.wo, c.hidden_size, q_dim, p + "o"));
    RETURN_IF_ERROR(CheckMatrix(l.w_gate, c.intermediate_size, c.hidden_size, p + "gate"));
    RETURN_IF_ERROR(CheckMatrix(l.w_up, c.intermediate_size, c.hidden_size, p + "up"));
    RETURN_IF_ERROR(CheckMatrix(l.w_down, c.hidden_size, c.intermediate_size, p + "down"));
  }
  if (w->lm_head.n_out == 0) {
    // Tied: the output projection reads the embedding table.
    const Embedding& e = w->token_embedding;
    if (kernels::IsQuantMatmulType(e.type)) {
      w->lm_head.type = e.type;
      w->lm_head.blocks = e.data;
    } else if (e.type == GgmlType::kF32) {
      w->lm_head.type = GgmlType::kF32;
      const float* f = reinterpret_cast<const float*>(e.data);
      w->lm_head.f32.assign(f, f + e.rows * e.dim);
    } else {
      return absl::InvalidArgumentError("tied embedding type cannot serve as the output matrix");
    }
    w->lm_head.n_out = e.rows;
    w->lm_head.n_in = e.dim;
  }
  RETURN_IF_ERROR(CheckMatrix(w->lm_head, c.vocab_size, c.hidden_size, "output"));
  for (LlamaLayerWeights& l : w->layers) {
    for (Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      RETURN_IF_ERROR(Pack(m));
    }
  }
  return Pack(&w->lm_head);
}

}  // namespace pagellm::internal
