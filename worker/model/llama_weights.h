// LlamaWeights: the tensors of a Llama-family decoder in the form the CPU kernels consume, and
// the loaders that build them from a GGUF file, a Hugging Face directory or random values.
//
// Matrices in Q4_0 / Q4_1 / Q8_0 stay in their GGML blocks (zero-copy from the mapped file) and
// run through the integer kernels; every other type is converted to fp32 at load and runs
// through BLAS. Loaders check every tensor's presence, type and shape against the config and
// return InvalidArgument naming the tensor otherwise.
//
// Immutable after loading; thread-safe for concurrent reads.
#ifndef PAGELLM_WORKER_MODEL_LLAMA_WEIGHTS_H_
#define PAGELLM_WORKER_MODEL_LLAMA_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ggml_type.h"
#include "kernels/cpu/quant_matmul.h"
#include "worker/model/model_config.h"

namespace pagellm {

class GgufFile;
class HfCheckpoint;

// W[n_out][n_in]: either GGML blocks (`type` in Q4_0/Q4_1/Q8_0, `blocks` points to n_out rows
// in the source, `packed` is their kernel layout, made by FinishWeights) or fp32 (`type` ==
// kF32, `f32` holds n_out * n_in values).
struct Matrix {
  GgmlType type = GgmlType::kF32;
  int64_t n_out = 0;
  int64_t n_in = 0;
  const uint8_t* blocks = nullptr;
  kernels::PackedQuantMatrix packed;
  std::vector<float> f32;
  std::vector<float> bias;  // empty, or n_out values
};

// Token embeddings: rows of any dequantizable GGML type (looked up one row at a time).
struct Embedding {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;
  int64_t dim = 0;
  const uint8_t* data = nullptr;  // into the source file or `owned`
  std::vector<uint8_t> owned;
  int64_t row_bytes = 0;
};

struct LlamaLayerWeights {
  std::vector<float> attn_norm;
  std::vector<float> ffn_norm;
  Matrix wq, wk, wv, wo;
  Matrix w_gate, w_up, w_down;
};

struct LlamaWeights {
  ModelConfig config;
  // True for the Hugging Face (rotate-half) RoPE layout, false for GGUF llama's interleaved
  // pairs (llama.cpp permutes Q/K rows at conversion).
  bool rope_neox = true;
  std::vector<float> rope_freq_factors;  // empty, or head_dim/2 divisors (GGUF rope_freqs)
  Embedding token_embedding;
  std::vector<LlamaLayerWeights> layers;
  std::vector<float> output_norm;
  Matrix lm_head;  // a copy of the embedding's view when tied
  // Keeps the mapped file alive while views into it exist.
  std::shared_ptr<const void> source;
};

// Reads the model config from GGUF metadata (`general.architecture` llama or qwen2).
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf);

// Builds weights over a mapped GGUF file (shared ownership keeps it mapped).
absl::StatusOr<std::unique_ptr<LlamaWeights>> LoadLlamaFromGguf(std::shared_ptr<GgufFile> gguf);

// Builds weights from a Hugging Face checkpoint (F32/F16/BF16 tensors, converted to fp32).
absl::StatusOr<std::unique_ptr<LlamaWeights>> LoadLlamaFromHf(std::shared_ptr<HfCheckpoint> ckpt);

// Random weights of the given shape, for benchmarking large shapes without files. `type` is the
// matrix type: kQ4_0, kQ4_1, kQ8_0 or kF32. Deterministic in `seed`.
absl::StatusOr<std::unique_ptr<LlamaWeights>> MakeDummyLlama(const ModelConfig& config,
                                                             GgmlType type, uint64_t seed);

// Named shapes for --load-format dummy: "llama-3-8b", "llama-2-7b", "llama-2-13b",
// "mistral-7b", "qwen2-7b", "smollm2-135m". NotFound for other names.
absl::StatusOr<ModelConfig> DummyModelPreset(const std::string& name);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_LLAMA_WEIGHTS_H_
