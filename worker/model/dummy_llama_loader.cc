// Random LlamaWeights for benchmarking shapes without weight files (--load-format dummy).
// Values are scaled so that activations stay finite through many layers; the text generated is
// meaningless by design.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/quant_matmul.h"
#include "worker/model/llama_weights.h"
#include "worker/model/llama_weights_common.h"

namespace pagellm {
namespace {

struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float Uniform() { return static_cast<float>(Next() >> 40) / static_cast<float>(1 << 24); }
};

// Fills GGML blocks with random quants and a scale giving weights of about +-scale.
void FillBlocks(GgmlType type, int64_t n, float scale, Rng& rng, uint8_t* out) {
  const auto t = GetGgmlTypeTraits(type);
  const int64_t blocks = n / t.block_elems;
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* p = out + b * t.block_bytes;
    for (int64_t i = 0; i < t.block_bytes; i += 8) {
      uint64_t r = rng.Next();
      std::memcpy(p + i, &r, std::min<int64_t>(8, t.block_bytes - i));
    }
    const float d = type == GgmlType::kQ8_0 ? scale / 127.0f : scale / 8.0f;
    const uint16_t dh = kernels::FloatToHalf(d);
    std::memcpy(p, &dh, 2);
    if (type == GgmlType::kQ4_1) {
      const uint16_t mh = kernels::FloatToHalf(-8.0f * d);
      std::memcpy(p + 2, &mh, 2);
    }
  }
}

}  // namespace

absl::StatusOr<ModelConfig> DummyModelPreset(const std::string& name) {
  ModelConfig c;
  auto set = [&c](int64_t vocab, int64_t hidden, int64_t inter, int64_t layers, int64_t heads,
                  int64_t kv, int64_t ctx, float theta) {
    c.vocab_size = vocab;
    c.hidden_size = hidden;
    c.intermediate_size = inter;
    c.num_layers = layers;
    c.num_heads = heads;
    c.num_kv_heads = kv;
    c.head_dim = hidden / heads;
    c.max_position_embeddings = ctx;
    c.rope_theta = theta;
  };
  if (name == "llama-3-8b") {
    set(128256, 4096, 14336, 32, 32, 8, 8192, 500000.0f);
  } else if (name == "llama-2-7b") {
    set(32000, 4096, 11008, 32, 32, 32, 4096, 10000.0f);
  } else if (name == "llama-2-13b") {
    set(32000, 5120, 13824, 40, 40, 40, 4096, 10000.0f);
  } else if (name == "mistral-7b") {
    set(32000, 4096, 14336, 32, 32, 8, 32768, 1000000.0f);
  } else if (name == "qwen2-7b") {
    set(152064, 3584, 18944, 28, 28, 4, 32768, 1000000.0f);
    c.architecture = "qwen2";
    c.attention_bias = true;
  } else if (name == "smollm2-135m") {
    set(49152, 576, 1536, 30, 9, 3, 8192, 100000.0f);
    c.tie_word_embeddings = true;
  } else {
    return absl::NotFoundError(absl::StrCat(
        "unknown dummy model '", name,
        "' (known: llama-3-8b, llama-2-7b, llama-2-13b, mistral-7b, qwen2-7b, smollm2-135m)"));
  }
  return c;
}

absl::StatusOr<std::unique_ptr<LlamaWeights>> MakeDummyLlama(const ModelConfig& config,
                                                             GgmlType type, uint64_t seed) {
  RETURN_IF_ERROR(config.Validate());
  if (type != GgmlType::kF32 && !kernels::IsQuantMatmulType(type))
    return absl::InvalidArgumentError("dummy weights: type must be q4_0, q4_1, q8_0 or f32");
  if (type != GgmlType::kF32 && (config.hidden_size % 32 != 0 || config.intermediate_size % 32 != 0 ||
                                 (config.num_heads * config.head_dim) % 32 != 0))
    return absl::InvalidArgumentError("dummy weights: quantized matrices need dims divisible by 32");
  auto w = std::make_unique<LlamaWeights>();
  w->config = config;
  const ModelConfig& c = w->config;
  w->rope_neox = true;
  Rng rng{seed};
  auto arena = std::make_shared<std::vector<std::vector<uint8_t>>>();
  auto matrix = [&](int64_t n_out, int64_t n_in, bool bias) {
    Matrix m;
    m.type = type;
    m.n_out = n_out;
    m.n_in = n_in;
    const float scale = 1.0f / std::sqrt(static_cast<float>(n_in));
    if (type == GgmlType::kF32) {
      m.f32.resize(n_out * n_in);
      for (auto& v : m.f32) v = (rng.Uniform() * 2 - 1) * scale;
    } else {
      const auto t = GetGgmlTypeTraits(type);
      arena->emplace_back(n_out * n_in / t.block_elems * t.block_bytes);
      FillBlocks(type, n_out * n_in, scale, rng, arena->back().data());
      m.blocks = arena->back().data();
    }
    if (bias) m.bias.assign(n_out, 0.01f);
    return m;
  };
  Embedding& e = w->token_embedding;
  e.rows = c.vocab_size;
  e.dim = c.hidden_size;
  {
    Matrix emb = matrix(c.vocab_size, c.hidden_size, false);
    e.type = emb.type;
    if (type == GgmlType::kF32) {
      e.owned.resize(emb.f32.size() * sizeof(float));
      std::memcpy(e.owned.data(), emb.f32.data(), e.owned.size());
      e.data = e.owned.data();
      e.row_bytes = c.hidden_size * sizeof(float);
    } else {
      e.data = emb.blocks;
      const auto t = GetGgmlTypeTraits(type);
      e.row_bytes = c.hidden_size / t.block_elems * t.block_bytes;
    }
  }
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  w->layers.resize(c.num_layers);
  for (auto& l : w->layers) {
    l.attn_norm.assign(c.hidden_size, 1.0f);
    l.ffn_norm.assign(c.hidden_size, 1.0f);
    l.wq = matrix(q_dim, c.hidden_size, c.attention_bias);
    l.wk = matrix(kv_dim, c.hidden_size, c.attention_bias);
    l.wv = matrix(kv_dim, c.hidden_size, c.attention_bias);
    l.wo = matrix(c.hidden_size, q_dim, false);
    l.w_gate = matrix(c.intermediate_size, c.hidden_size, false);
    l.w_up = matrix(c.intermediate_size, c.hidden_size, false);
    l.w_down = matrix(c.hidden_size, c.intermediate_size, false);
  }
  w->output_norm.assign(c.hidden_size, 1.0f);
  if (!c.tie_word_embeddings) w->lm_head = matrix(c.vocab_size, c.hidden_size, false);
  w->source = arena;
  RETURN_IF_ERROR(internal::FinishWeights(w.get()));
  return w;
}

}  // namespace pagellm
