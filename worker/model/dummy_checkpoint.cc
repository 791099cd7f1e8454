// Random weights for benchmarking shapes without weight files (--load-format dummy), as a
// checkpoint like any other. Values are scaled so that activations stay finite through many
// layers; the text generated is meaningless by design.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "common/status_macros.h"
#include "worker/model/model_checkpoint.h"

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
    const uint16_t dh = FloatToHalf(d);
    std::memcpy(p, &dh, 2);
    if (type == GgmlType::kQ4_1) {
      const uint16_t mh = FloatToHalf(-8.0f * d);
      std::memcpy(p + 2, &mh, 2);
    }
  }
}

// `n` random values of about +-scale in `type` (a float type or GGML blocks).
std::vector<uint8_t> RandomTensor(GgmlType type, int64_t n, float scale, Rng& rng) {
  const GgmlTypeTraits t = GetGgmlTypeTraits(type);
  std::vector<uint8_t> bytes(n / t.block_elems * t.block_bytes);
  if (t.block_elems > 1) {
    FillBlocks(type, n, scale, rng, bytes.data());
    return bytes;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = (rng.Uniform() * 2 - 1) * scale;
    if (type == GgmlType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = type == GgmlType::kF16 ? FloatToHalf(v) : FloatToBf16(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

std::vector<uint8_t> ConstantF32(int64_t n, float value) {
  std::vector<uint8_t> bytes(n * sizeof(float));
  for (int64_t i = 0; i < n; ++i) std::memcpy(bytes.data() + 4 * i, &value, 4);
  return bytes;
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
  } else if (name == "llama-tiny") {
    // SmolLM2's vocabulary (so its tokenizer serves it) with heads and KV heads that 2 and 4
    // divide: the tensor-parallel tests' model.
    set(49152, 512, 1536, 4, 8, 4, 4096, 10000.0f);
  } else {
    return absl::NotFoundError(absl::StrCat("unknown dummy model '", name,
                                            "' (known: llama-3-8b, llama-2-7b, llama-2-13b, "
                                            "mistral-7b, qwen2-7b, smollm2-135m, llama-tiny)"));
  }
  return c;
}

absl::StatusOr<std::unique_ptr<ModelCheckpoint>> MakeDummyCheckpoint(const ModelConfig& config,
                                                                     GgmlType type, uint64_t seed) {
  RETURN_IF_ERROR(config.Validate());
  const bool quantized =
      type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || type == GgmlType::kQ8_0;
  if (!quantized && type != GgmlType::kF32 && type != GgmlType::kF16 && type != GgmlType::kBF16) {
    return absl::InvalidArgumentError(
        "dummy weights: type must be q4_0, q4_1, q8_0, f16, bf16 or f32");
  }
  if (quantized && (config.hidden_size % 32 != 0 || config.intermediate_size % 32 != 0 ||
                    (config.num_heads * config.head_dim) % 32 != 0)) {
    return absl::InvalidArgumentError(
        "dummy weights: quantized matrices need dims divisible by 32");
  }
  auto ckpt = std::make_unique<ModelCheckpoint>();
  ckpt->config = config;
  ckpt->rope_neox = true;
  Rng rng{seed};
  for (const LlamaTensorSpec& spec : LlamaTensorSpecs(config)) {
    if (spec.optional) continue;  // rope_freqs; lm_head when tied
    const int64_t n = spec.shape.size() == 1 ? spec.shape[0] : spec.shape[0] * spec.shape[1];
    const bool is_bias = absl::EndsWith(spec.name, ".bias");
    if (spec.shape.size() == 1) {  // norms (1.0) and biases (0.01), fp32
      RETURN_IF_ERROR(ckpt->tensors.AddOwned(spec.name, GgmlType::kF32, spec.shape,
                                             ConstantF32(n, is_bias ? 0.01f : 1.0f)));
      continue;
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(spec.shape[1]));
    RETURN_IF_ERROR(
        ckpt->tensors.AddOwned(spec.name, type, spec.shape, RandomTensor(type, n, scale, rng)));
  }
  RETURN_IF_ERROR(CheckLlamaTensors(*ckpt));
  return ckpt;
}

absl::StatusOr<std::unique_ptr<ModelCheckpoint>> MakeGeneratedCheckpoint(const ModelConfig& config,
                                                                         GgmlType type,
                                                                         uint64_t seed) {
  RETURN_IF_ERROR(config.Validate());
  if (type != GgmlType::kF16 && type != GgmlType::kBF16) {
    return absl::InvalidArgumentError(
        "dummy weights generated on the GPU: --dummy-dtype must be f16 or bf16");
  }
  auto ckpt = std::make_unique<ModelCheckpoint>();
  ckpt->config = config;
  ckpt->rope_neox = true;
  ckpt->generated = ModelCheckpoint::Generated{type, seed};
  return ckpt;
}

}  // namespace pagellm
