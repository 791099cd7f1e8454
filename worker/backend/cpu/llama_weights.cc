// Packing a checkpoint for the CPU kernels: the only place where weights change type on the
// host. The checkpoint's readers have checked names, shapes and that every type is known;
// what is checked here is what the CPU kernels in particular need.
#include "worker/backend/cpu/llama_weights.h"

#include <unistd.h>

#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/cpu/bf16_matmul.h"
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

// Packs `t`, releasing its source rows as they are packed: a large matrix (the embedding) is
// not resident twice while it is repacked.
absl::StatusOr<kernels::PackedQuantMatrix> Pack(const ModelCheckpoint& c, const TensorView& t,
                                                const std::string& name) {
  std::function<void(int64_t)> done;
  if (c.drop_pages) {
    done = [&](int64_t rows) { c.drop_pages(t.data, static_cast<uint64_t>(rows * t.row_bytes())); };
  }
  auto packed = kernels::PackQuantMatrix(t.dtype, t.data, t.shape[0], t.shape[1], done);
  if (!packed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, ": ", packed.status().message()));
  }
  return packed;
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

// A column shard is a strided view; the packers read contiguous rows, so its rows are copied
// end to end into `storage` first (a copy of this rank's slice only, freed once packed).
TensorView Compact(const TensorView& t, std::vector<uint8_t>* storage) {
  if (t.contiguous()) return t;
  const int64_t rb = t.row_bytes();
  storage->resize(static_cast<size_t>(t.num_rows() * rb));
  for (int64_t r = 0; r < t.num_rows(); ++r) std::memcpy(storage->data() + r * rb, t.row(r), rb);
  TensorView v = t;
  v.data = storage->data();
  v.row_stride_bytes = rb;
  return v;
}

// `slice` of the checkpoint's matrix `full` for the kernels: quantized blocks the integer kernels
// multiply stay blocks (repacked); anything else is fp32, or bfloat16 when bf16.
absl::StatusOr<Matrix> PackSlice(const ModelCheckpoint& c, const TensorView& full,
                                 const TensorView& slice, const std::string& name, bool bf16) {
  std::vector<uint8_t> storage;
  const TensorView t = Compact(slice, &storage);
  // Pages are released as rows are packed only when they are the checkpoint's own rows.
  const bool own_rows = t.data == slice.data;
  ModelCheckpoint no_drop;
  Matrix m;
  m.n_out = t.shape[0];
  m.n_in = t.shape[1];
  if (kernels::IsQuantMatmulType(t.dtype)) {
    m.type = t.dtype;
    ASSIGN_OR_RETURN(m.packed, Pack(own_rows ? c : no_drop, t, name));
  } else {
    RETURN_IF_ERROR(FloatMatrix(t, name + ".weight", bf16, &m));
  }
  DropSource(c, full);  // this rank reads none of it again
  return m;
}

// Matrix `name` (and its bias), the slice `shard` holds.
absl::StatusOr<Matrix> LoadMatrix(const ModelCheckpoint& c, const std::string& name, bool bias,
                                  bool bf16, const ShardSpec& shard) {
  ASSIGN_OR_RETURN(const TensorView* full, Contiguous(c, name + ".weight"));
  ASSIGN_OR_RETURN(const TensorView slice, LlamaShard(c, name + ".weight", shard));
  ASSIGN_OR_RETURN(Matrix m, PackSlice(c, *full, slice, name, bf16));
  if (bias) {
    ASSIGN_OR_RETURN(const TensorView b, LlamaShard(c, name + ".bias", shard));
    ASSIGN_OR_RETURN(m.bias, ToF32(b, name + ".bias"));
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

absl::Status LlamaWeights::LookupEmbedding(int64_t id, float* out) const {
  const Embedding& e = token_embedding;
  if (!e.from_lm_head) return kernels::DequantizeRow(e.type, e.data + id * e.row_bytes, out, e.dim);
  const int64_t row = id - vocab_begin;
  if (lm_head.type == GgmlType::kF32) {
    std::memcpy(out, lm_head.f32.data() + row * e.dim, static_cast<size_t>(e.dim) * sizeof(float));
  } else {
    kernels::DequantizePackedRow(lm_head.packed, row, out);
  }
  return absl::OkStatus();
}

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
  w->shard = options.shard;
  ASSIGN_OR_RETURN(w->rank_config, RankConfig(c.config, options.shard));
  w->rope_neox = c.rope_neox;
  const ModelConfig& cfg = w->config;
  const ShardSpec& shard = options.shard;

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
  if (bf16) {
    PLOG_INFO("bf16 weights in the {} layout (PAGELLM_BF16_PAIRS=0 or 1 pins it)",
              kernels::Bf16LayoutName(kernels::PreferredBf16Layout()));
  }
  w->layers.resize(cfg.num_layers);
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    LlamaLayerWeights& l = w->layers[i];
    auto name = [i](absl::string_view suffix) { return LlamaTensorName(i, suffix); };
    ASSIGN_OR_RETURN(l.attn_norm, Vector(c, name("input_layernorm.weight")));
    ASSIGN_OR_RETURN(l.ffn_norm, Vector(c, name("post_attention_layernorm.weight")));
    ASSIGN_OR_RETURN(l.wq, LoadMatrix(c, name("self_attn.q_proj"), b, bf16, shard));
    ASSIGN_OR_RETURN(l.wk, LoadMatrix(c, name("self_attn.k_proj"), b, bf16, shard));
    ASSIGN_OR_RETURN(l.wv, LoadMatrix(c, name("self_attn.v_proj"), b, bf16, shard));
    ASSIGN_OR_RETURN(l.wo, LoadMatrix(c, name("self_attn.o_proj"), false, bf16, shard));
    ASSIGN_OR_RETURN(l.w_gate, LoadMatrix(c, name("mlp.gate_proj"), false, bf16, shard));
    ASSIGN_OR_RETURN(l.w_up, LoadMatrix(c, name("mlp.up_proj"), false, bf16, shard));
    ASSIGN_OR_RETURN(l.w_down, LoadMatrix(c, name("mlp.down_proj"), false, bf16, shard));
  }
  ASSIGN_OR_RETURN(w->output_norm, Vector(c, "model.norm.weight"));
  // Vocabulary-parallel when the world size divides the vocabulary: this rank's rows of the
  // output projection (and of a tied embedding).
  const ShardSpec vocab_shard = VocabShard(cfg.vocab_size, shard);
  w->vocab_begin = VocabBegin(cfg.vocab_size, vocab_shard);
  w->vocab_end = w->vocab_begin + cfg.vocab_size / vocab_shard.world_size;
  const bool tied = c.tensors.Find("lm_head.weight") == nullptr;
  ASSIGN_OR_RETURN(const TensorView* head,
                   Contiguous(c, tied ? "model.embed_tokens.weight" : "lm_head.weight"));
  ASSIGN_OR_RETURN(const TensorView head_slice, ShardOf(*head, vocab_shard, ShardDim::kRows));
  ASSIGN_OR_RETURN(w->lm_head,
                   PackSlice(c, *head, head_slice, tied ? "model.embed_tokens" : "lm_head", bf16));
  if (tied) {
    // Lookups read the copy when it holds the checkpoint's values exactly (packed blocks, or
    // fp32); a bfloat16 copy does not, and lookups fault the checkpoint's rows back in.
    e.from_lm_head = w->lm_head.type != GgmlType::kBF16;
  }
  if (c.drop_pages) {
    // Dropping releases only the pages wholly inside a tensor; the pages tensors share at
    // their ends stay resident (a page or two each, a megabyte over a few hundred tensors).
    // Everything but an embedding read in place is a copy now, so those go too, each tensor's
    // range widened by a page less a byte on both sides (a page the in-place embedding shares
    // is simply read again when a lookup touches it).
    const auto kPage = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    for (const std::string& name : c.tensors.Names()) {
      const TensorView* t = c.tensors.Find(name);
      if (t == nullptr || (t == embd && !e.from_lm_head)) continue;
      const auto begin = reinterpret_cast<uintptr_t>(t->data);
      const auto bytes = static_cast<uintptr_t>(t->num_rows() * t->row_bytes());
      const uintptr_t from = begin > kPage ? begin - (kPage - 1) : 0;
      c.drop_pages(reinterpret_cast<const uint8_t*>(from), begin + bytes + (kPage - 1) - from);
    }
  }
  w->source = std::move(checkpoint);
  return w;
}

}  // namespace pagellm
