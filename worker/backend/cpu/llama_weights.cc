// Packing a checkpoint for the CPU kernels: the only place where weights change type on the
// host. The checkpoint's readers have checked names, shapes and that every type is known;
// what is checked here is what the CPU kernels in particular need.
#include "worker/backend/cpu/llama_weights.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/quant_matmul.h"

namespace pagellm {
namespace {

absl::StatusOr<const TensorView*> Contiguous(const ModelCheckpoint& c, const std::string& name) {
  ASSIGN_OR_RETURN(const TensorView* t, c.tensors.Get(name));
  if (!t->contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " is a strided view"));
  }
  return t;
}

absl::StatusOr<std::vector<float>> ToF32(const TensorView& t, const std::string& name) {
  if (!GetGgmlTypeTraits(t.dtype).dequantizable) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": unsupported type"));
  }
  std::vector<float> out(t.num_elements());
  RETURN_IF_ERROR(kernels::DequantizeRow(t.dtype, t.data, out.data(), t.num_elements()));
  return out;
}

absl::StatusOr<std::vector<float>> Vector(const ModelCheckpoint& c, const std::string& name) {
  ASSIGN_OR_RETURN(const TensorView* t, Contiguous(c, name));
  return ToF32(*t, name);
}

// The checkpoint's bytes of `t` are not read again (packing or widening made the copy the
// kernels use): their pages leave the resident set.
void DropSource(const ModelCheckpoint& c, const TensorView& t) {
  if (c.drop_pages) c.drop_pages(t.data, static_cast<uint64_t>(t.num_rows() * t.row_bytes()));
}

// Fills m (n_out, n_in set) from float weights: fp32, or packed bfloat16 when bf16.
absl::Status FloatMatrix(const TensorView& t, const std::string& name, bool bf16, Matrix* m) {
  ASSIGN_OR_RETURN(std::vector<float> f32, ToF32(t, name));
  if (bf16) {
    m->type = GgmlType::kBF16;
    m->bf16 = kernels::PackBf16Matrix(f32.data(), m->n_out, m->n_in);
  } else {
    m->type = GgmlType::kF32;
    m->f32 = std::move(f32);
  }
  return absl::OkStatus();
}

// Quantized blocks the integer kernels multiply stay blocks (repacked); anything else is fp32,
// or bfloat16 when bf16.
absl::StatusOr<Matrix> LoadMatrix(const ModelCheckpoint& c, const std::string& name, bool bias,
                                  bool bf16) {
  ASSIGN_OR_RETURN(const TensorView* t, Contiguous(c, name + ".weight"));
  Matrix m;
  m.n_out = t->shape[0];
  m.n_in = t->shape[1];
  if (kernels::IsQuantMatmulType(t->dtype)) {
    m.type = t->dtype;
    auto packed = kernels::PackQuantMatrix(m.type, t->data, m.n_out, m.n_in);
    if (!packed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, ": ", packed.status().message()));
    }
    m.packed = *std::move(packed);
  } else {
    RETURN_IF_ERROR(FloatMatrix(*t, name + ".weight", bf16, &m));
  }
  DropSource(c, *t);
  if (bias) {
    ASSIGN_OR_RETURN(m.bias, Vector(c, name + ".bias"));
  }
  return m;
}

int64_t Bytes(const std::vector<float>& v) {
  return static_cast<int64_t>(v.size() * sizeof(float));
}

int64_t Bytes(const Matrix& m) {
  return static_cast<int64_t>(m.packed.data.size()) + Bytes(m.packed.super) + m.bf16.bytes() +
         Bytes(m.f32) + Bytes(m.bias);
}

}  // namespace

int64_t LlamaWeights::HostBytes() const {
  int64_t n = Bytes(rope_freq_factors) + Bytes(output_norm) + Bytes(lm_head);
  for (const LlamaLayerWeights& l : layers) {
    n += Bytes(l.attn_norm) + Bytes(l.ffn_norm) + Bytes(l.wq) + Bytes(l.wk) + Bytes(l.wv) +
         Bytes(l.wo) + Bytes(l.w_gate) + Bytes(l.w_up) + Bytes(l.w_down);
  }
  return n;
}

absl::StatusOr<std::unique_ptr<LlamaWeights>> PackLlamaWeights(
    std::shared_ptr<const ModelCheckpoint> checkpoint, const LlamaPackOptions& options) {
  if (checkpoint->generated.has_value()) {
    return absl::InvalidArgumentError(
        "the CPU backend needs weights on the host, not ones a GPU generates");
  }
  const ModelCheckpoint& c = *checkpoint;
  RETURN_IF_ERROR(CheckLlamaTensors(c));
  auto w = std::make_unique<LlamaWeights>();
  w->config = c.config;
  w->rope_neox = c.rope_neox;
  const ModelConfig& cfg = w->config;

  ASSIGN_OR_RETURN(const TensorView* embd, Contiguous(c, "model.embed_tokens.weight"));
  Embedding& e = w->token_embedding;
  e.type = embd->dtype;
  e.rows = embd->shape[0];
  e.dim = embd->shape[1];
  e.data = embd->data;
  e.row_bytes = embd->row_bytes();

  if (c.tensors.Find("rope_freqs.weight") != nullptr) {
    ASSIGN_OR_RETURN(w->rope_freq_factors, Vector(c, "rope_freqs.weight"));
  }
  const bool b = cfg.attention_bias, bf16 = options.bf16_matrices;
  w->layers.resize(cfg.num_layers);
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    LlamaLayerWeights& l = w->layers[i];
    auto name = [i](absl::string_view suffix) { return LlamaTensorName(i, suffix); };
    ASSIGN_OR_RETURN(l.attn_norm, Vector(c, name("input_layernorm.weight")));
    ASSIGN_OR_RETURN(l.ffn_norm, Vector(c, name("post_attention_layernorm.weight")));
    ASSIGN_OR_RETURN(l.wq, LoadMatrix(c, name("self_attn.q_proj"), b, bf16));
    ASSIGN_OR_RETURN(l.wk, LoadMatrix(c, name("self_attn.k_proj"), b, bf16));
    ASSIGN_OR_RETURN(l.wv, LoadMatrix(c, name("self_attn.v_proj"), b, bf16));
    ASSIGN_OR_RETURN(l.wo, LoadMatrix(c, name("self_attn.o_proj"), false, bf16));
    ASSIGN_OR_RETURN(l.w_gate, LoadMatrix(c, name("mlp.gate_proj"), false, bf16));
    ASSIGN_OR_RETURN(l.w_up, LoadMatrix(c, name("mlp.up_proj"), false, bf16));
    ASSIGN_OR_RETURN(l.w_down, LoadMatrix(c, name("mlp.down_proj"), false, bf16));
  }
  ASSIGN_OR_RETURN(w->output_norm, Vector(c, "model.norm.weight"));
  if (c.tensors.Find("lm_head.weight") != nullptr) {
    ASSIGN_OR_RETURN(w->lm_head, LoadMatrix(c, "lm_head", false, bf16));
  } else {
    // Tied: the output projection reads the embedding table, packed or widened.
    Matrix& m = w->lm_head;
    m.n_out = e.rows;
    m.n_in = e.dim;
    if (kernels::IsQuantMatmulType(e.type)) {
      m.type = e.type;
      ASSIGN_OR_RETURN(m.packed, kernels::PackQuantMatrix(m.type, e.data, m.n_out, m.n_in));
    } else {
      RETURN_IF_ERROR(FloatMatrix(*embd, "model.embed_tokens.weight", bf16, &m));
    }
    // Lookups read single rows again (a page each); the whole table need not stay resident.
    DropSource(c, *embd);
  }
  w->source = std::move(checkpoint);
  return w;
}

}  // namespace pagellm
