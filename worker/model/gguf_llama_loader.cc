// LlamaWeights from GGUF (llama.cpp's tensor names: token_embd, blk.N.attn_q, ...).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/quant_matmul.h"
#include "worker/model/gguf_file.h"
#include "worker/model/llama_weights.h"
#include "worker/model/llama_weights_common.h"

namespace pagellm {
namespace {

absl::StatusOr<const GgufTensorInfo*> Get(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
  return t;
}

absl::StatusOr<std::vector<float>> ToF32(const GgufTensorInfo& t) {
  if (!GetGgmlTypeTraits(t.type).dequantizable)
    return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, ": unsupported type"));
  std::vector<float> out(t.num_elements);
  RETURN_IF_ERROR(kernels::DequantizeRow(t.type, t.data, out.data(), t.num_elements));
  return out;
}

absl::StatusOr<std::vector<float>> Vector(const GgufFile& f, const std::string& name,
                                          int64_t n) {
  ASSIGN_OR_RETURN(const GgufTensorInfo* t, Get(f, name));
  if (t->num_elements != n)
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " has ", t->num_elements,
                                                   " elements, expected ", n));
  return ToF32(*t);
}

absl::StatusOr<Matrix> LoadMatrix(const GgufFile& f, const std::string& name, int64_t n_out,
                                  int64_t n_in) {
  ASSIGN_OR_RETURN(const GgufTensorInfo* t, Get(f, name));
  if (t->dims.size() != 2 || t->dims[0] != n_in || t->dims[1] != n_out) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " has the wrong shape, expected [",
                                                   n_in, ", ", n_out, "]"));
  }
  Matrix m;
  m.n_out = n_out;
  m.n_in = n_in;
  if (kernels::IsQuantMatmulType(t->type)) {
    m.type = t->type;
    m.blocks = t->data;
  } else {
    m.type = GgmlType::kF32;
    ASSIGN_OR_RETURN(m.f32, ToF32(*t));
  }
  const std::string bias_name = name.substr(0, name.size() - 6) + "bias";  // "weight" -> "bias"
  if (f.FindTensor(bias_name) != nullptr) {
    ASSIGN_OR_RETURN(m.bias, Vector(f, bias_name, n_out));
  }
  return m;
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& f) {
  ModelConfig c;
  ASSIGN_OR_RETURN(std::string_view arch, f.GetString("general.architecture"));
  if (arch != "llama" && arch != "qwen2") {
    return absl::UnimplementedError(absl::StrCat("unsupported architecture '", std::string(arch),
                                                 "' (supported: llama, qwen2)"));
  }
  c.architecture = std::string(arch);
  const std::string a(arch);
  ASSIGN_OR_RETURN(c.hidden_size, f.GetInt(a + ".embedding_length"));
  ASSIGN_OR_RETURN(c.intermediate_size, f.GetInt(a + ".feed_forward_length"));
  ASSIGN_OR_RETURN(c.num_layers, f.GetInt(a + ".block_count"));
  ASSIGN_OR_RETURN(c.num_heads, f.GetInt(a + ".attention.head_count"));
  c.num_kv_heads = c.num_heads;
  if (f.Find(a + ".attention.head_count_kv") != nullptr) {
    ASSIGN_OR_RETURN(c.num_kv_heads, f.GetInt(a + ".attention.head_count_kv"));
  }
  ASSIGN_OR_RETURN(c.max_position_embeddings, f.GetInt(a + ".context_length"));
  ASSIGN_OR_RETURN(double eps, f.GetFloat(a + ".attention.layer_norm_rms_epsilon"));
  c.rms_norm_eps = static_cast<float>(eps);
  if (f.Find(a + ".rope.freq_base") != nullptr) {
    ASSIGN_OR_RETURN(double theta, f.GetFloat(a + ".rope.freq_base"));
    c.rope_theta = static_cast<float>(theta);
  }
  c.head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
  if (f.Find(a + ".attention.key_length") != nullptr) {
    ASSIGN_OR_RETURN(c.head_dim, f.GetInt(a + ".attention.key_length"));
  }
  if (f.Find(a + ".rope.scaling.type") != nullptr) {
    ASSIGN_OR_RETURN(std::string_view type, f.GetString(a + ".rope.scaling.type"));
    if (type == "linear") {
      c.rope_scaling.type = RopeScaling::Type::kLinear;
      ASSIGN_OR_RETURN(double factor, f.GetFloat(a + ".rope.scaling.factor"));
      c.rope_scaling.factor = static_cast<float>(factor);
    } else if (type != "none") {
      return absl::UnimplementedError(absl::StrCat("unsupported rope scaling '", std::string(type), "'"));
    }
  }
  const GgufTensorInfo* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2)
    return absl::InvalidArgumentError("missing or malformed tensor token_embd.weight");
  c.vocab_size = embd->dims[1];
  c.tie_word_embeddings = f.FindTensor("output.weight") == nullptr;
  c.attention_bias = f.FindTensor("blk.0.attn_q.bias") != nullptr;
  RETURN_IF_ERROR(c.Validate());
  return c;
}

absl::StatusOr<std::unique_ptr<LlamaWeights>> LoadLlamaFromGguf(std::shared_ptr<GgufFile> gguf) {
  const GgufFile& f = *gguf;
  auto w = std::make_unique<LlamaWeights>();
  ASSIGN_OR_RETURN(w->config, ModelConfigFromGguf(f));
  const ModelConfig& c = w->config;
  // llama.cpp permutes llama Q/K rows into interleaved pairs; qwen2 keeps the NeoX layout.
  w->rope_neox = c.architecture == "qwen2";
  w->source = gguf;

  ASSIGN_OR_RETURN(const GgufTensorInfo* embd, Get(f, "token_embd.weight"));
  const auto traits = GetGgmlTypeTraits(embd->type);
  if (!traits.dequantizable || embd->dims[0] % traits.block_elems != 0)
    return absl::InvalidArgumentError("token_embd.weight: unsupported type");
  w->token_embedding.type = embd->type;
  w->token_embedding.rows = embd->dims[1];
  w->token_embedding.dim = embd->dims[0];
  w->token_embedding.data = embd->data;
  w->token_embedding.row_bytes = embd->dims[0] / traits.block_elems * traits.block_bytes;
  if (embd->type != GgmlType::kF32 && !kernels::IsQuantMatmulType(embd->type) &&
      c.tie_word_embeddings) {
    // Tied output in a type the kernels cannot multiply: keep an fp32 copy for both uses.
    ASSIGN_OR_RETURN(std::vector<float> f32, ToF32(*embd));
    w->token_embedding.owned.resize(f32.size() * sizeof(float));
    std::memcpy(w->token_embedding.owned.data(), f32.data(), w->token_embedding.owned.size());
    w->token_embedding.type = GgmlType::kF32;
    w->token_embedding.data = w->token_embedding.owned.data();
    w->token_embedding.row_bytes = embd->dims[0] * sizeof(float);
  }

  if (f.FindTensor("rope_freqs.weight") != nullptr) {
    ASSIGN_OR_RETURN(w->rope_freq_factors, Vector(f, "rope_freqs.weight", c.head_dim / 2));
  }
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  w->layers.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LlamaLayerWeights& l = w->layers[i];
    const std::string p = absl::StrCat("blk.", i, ".");
    ASSIGN_OR_RETURN(l.attn_norm, Vector(f, p + "attn_norm.weight", c.hidden_size));
    ASSIGN_OR_RETURN(l.ffn_norm, Vector(f, p + "ffn_norm.weight", c.hidden_size));
    ASSIGN_OR_RETURN(l.wq, LoadMatrix(f, p + "attn_q.weight", q_dim, c.hidden_size));
    ASSIGN_OR_RETURN(l.wk, LoadMatrix(f, p + "attn_k.weight", kv_dim, c.hidden_size));
    ASSIGN_OR_RETURN(l.wv, LoadMatrix(f, p + "attn_v.weight", kv_dim, c.hidden_size));
    ASSIGN_OR_RETURN(l.wo, LoadMatrix(f, p + "attn_output.weight", c.hidden_size, q_dim));
    ASSIGN_OR_RETURN(l.w_gate, LoadMatrix(f, p + "ffn_gate.weight", c.intermediate_size, c.hidden_size));
    ASSIGN_OR_RETURN(l.w_up, LoadMatrix(f, p + "ffn_up.weight", c.intermediate_size, c.hidden_size));
    ASSIGN_OR_RETURN(l.w_down, LoadMatrix(f, p + "ffn_down.weight", c.hidden_size, c.intermediate_size));
  }
  ASSIGN_OR_RETURN(w->output_norm, Vector(f, "output_norm.weight", c.hidden_size));
  if (!c.tie_word_embeddings) {
    ASSIGN_OR_RETURN(w->lm_head, LoadMatrix(f, "output.weight", c.vocab_size, c.hidden_size));
  }
  RETURN_IF_ERROR(internal::FinishWeights(w.get()));
  return w;
}

}  // namespace pagellm
