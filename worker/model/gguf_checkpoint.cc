// The checkpoint of a GGUF file (llama.cpp's tensor names: token_embd, blk.N.attn_q, ...),
// renamed to the canonical names of model_checkpoint.h. GGUF lists dimensions innermost first;
// the views give them outermost first. Nothing is converted: quantized blocks stay blocks.
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "worker/model/gguf_file.h"
#include "worker/model/model_checkpoint.h"

namespace pagellm {
namespace {

// llama.cpp's names of the per-layer tensors (after "blk.N.") and their canonical suffixes.
constexpr std::pair<absl::string_view, absl::string_view> kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};
constexpr std::pair<absl::string_view, absl::string_view> kGlobalNames[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"rope_freqs.weight", "rope_freqs.weight"},
};

// The canonical name of a GGUF tensor; empty for tensors the model does not use.
std::string CanonicalName(absl::string_view gguf_name) {
  for (const auto& [from, to] : kGlobalNames) {
    if (gguf_name == from) return std::string(to);
  }
  if (!absl::ConsumePrefix(&gguf_name, "blk.")) return "";
  const size_t dot = gguf_name.find('.');
  if (dot == absl::string_view::npos || dot == 0 || dot > 6) return "";
  int64_t layer = 0;
  for (char ch : gguf_name.substr(0, dot)) {
    if (ch < '0' || ch > '9') return "";
    layer = layer * 10 + (ch - '0');
  }
  const absl::string_view rest = gguf_name.substr(dot + 1);
  for (const auto& [from, to] : kLayerNames) {
    if (rest == from) return LlamaTensorName(layer, to);
  }
  return "";
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
      return absl::UnimplementedError(
          absl::StrCat("unsupported rope scaling '", std::string(type), "'"));
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

absl::StatusOr<std::unique_ptr<ModelCheckpoint>> ReadGgufCheckpoint(
    std::shared_ptr<const GgufFile> gguf) {
  auto ckpt = std::make_unique<ModelCheckpoint>();
  ASSIGN_OR_RETURN(ckpt->config, ModelConfigFromGguf(*gguf));
  // llama.cpp permutes llama Q/K rows into interleaved pairs; qwen2 keeps the NeoX layout.
  ckpt->rope_neox = ckpt->config.architecture == "qwen2";
  for (const GgufTensorInfo& t : gguf->tensors()) {
    std::string name = CanonicalName(t.name);
    if (name.empty()) continue;
    TensorView view;
    view.dtype = t.type;
    view.shape.assign(t.dims.rbegin(), t.dims.rend());
    view.data = t.data;
    RETURN_IF_ERROR(ckpt->tensors.Add(std::move(name), std::move(view)));
  }
  // The tensors keep the file alive as long as the checkpoint.
  ckpt->drop_pages = [file = gguf.get()](const uint8_t* p, uint64_t n) { file->DropPages(p, n); };
  ckpt->tensors.KeepAlive(std::move(gguf));
  RETURN_IF_ERROR(CheckLlamaTensors(*ckpt));
  return ckpt;
}

}  // namespace pagellm
