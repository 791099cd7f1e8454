// LlamaWeights: the tensors of a Llama-family decoder in the layout the CPU kernels consume,
// packed from a backend-neutral ModelCheckpoint.
//
// Matrices in the GGML block types the integer kernels take (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
// Q5_K, Q6_K, Q8_K) are repacked for them, staying quantized; every other type (F16, BF16,
// Q2_K, Q3_K) is widened to fp32 here and runs through BLAS -- or, with bf16_matrices, rounded
// to bfloat16 for the bf16 kernel (kernels/cpu/bf16_matmul.h). Norms and biases become fp32. The
// embedding is dequantized one looked-up row at a time, from the checkpoint or, when tied, from the
// output projection's copy. Once a matrix is copied, its pages of a mapped checkpoint are given
// back to the OS (ModelCheckpoint::drop_pages), so the model is resident once, in the kernels'
// layout.
//
// Immutable after packing; thread-safe for concurrent reads.
#ifndef PAGELLM_WORKER_BACKEND_CPU_LLAMA_WEIGHTS_H_
#define PAGELLM_WORKER_BACKEND_CPU_LLAMA_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ggml_type.h"
#include "kernels/cpu/bf16_matmul.h"
#include "kernels/cpu/quant_matmul.h"
#include "worker/model/model_checkpoint.h"

namespace pagellm {

// W[n_out][n_in]: GGML blocks (`type` one the integer kernels take, `packed` their kernel
// layout), bfloat16 (`type` == kBF16, `bf16` packed for its kernel) or fp32 (`type` == kF32, `f32`
// holds n_out * n_in values).
struct Matrix {
  GgmlType type = GgmlType::kF32;
  int64_t n_out = 0;
  int64_t n_in = 0;
  kernels::PackedQuantMatrix packed;
  kernels::PackedBf16Matrix bf16;
  std::vector<float> f32;
  std::vector<float> bias;  // empty, or n_out values
};

// Token embeddings, looked up one row at a time: rows of any dequantizable GGML type in the
// checkpoint, or -- when the output projection is tied to them and holds them losslessly -- that
// matrix's rows (packed blocks or fp32), so the table is resident once.
struct Embedding {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;
  int64_t dim = 0;
  const uint8_t* data = nullptr;  // into the checkpoint
  int64_t row_bytes = 0;
  bool from_lm_head = false;  // rows are read from LlamaWeights::lm_head, not `data`
};

struct LlamaLayerWeights {
  std::vector<float> attn_norm;
  std::vector<float> ffn_norm;
  Matrix wq, wk, wv, wo;
  Matrix w_gate, w_up, w_down;
};

struct LlamaWeights {
  ModelConfig config;  // the whole model's
  // Tensor parallelism: this rank's slice (llama_weights.cc says which tensors are split how)
  // and the dimensions it computes -- heads, KV heads and intermediate size divided by the
  // world size. rank_config == config for a single rank.
  ShardSpec shard;
  ModelConfig rank_config;
  // The vocabulary rows [vocab_begin, vocab_end) this rank holds of the output projection and
  // looks up in the embedding: a 1/world_size slice when world_size divides the vocabulary,
  // else all of it.
  int64_t vocab_begin = 0;
  int64_t vocab_end = 0;
  bool rope_neox = true;                 // see ModelCheckpoint::rope_neox
  std::vector<float> rope_freq_factors;  // empty, or head_dim/2 divisors (GGUF rope_freqs)
  Embedding token_embedding;
  std::vector<LlamaLayerWeights> layers;
  std::vector<float> output_norm;
  Matrix lm_head;  // rows [vocab_begin, vocab_end): the embedding's blocks or fp32 when tied
  // Keeps the checkpoint (and the files it maps) alive while views into it exist.
  std::shared_ptr<const ModelCheckpoint> source;

  // Writes embedding row `id` (vocab_begin <= id < vocab_end) as token_embedding.dim floats:
  // DequantizeRow of the checkpoint's row, wherever it is read from.
  absl::Status LookupEmbedding(int64_t id, float* out) const;

  // Host bytes the packed matrices, norms and biases take (the checkpoint's embedding rows,
  // read in place when untied, not included).
  int64_t HostBytes() const;
};

struct LlamaPackOptions {
  // Matrices stored as F32, F16 or BF16 become bfloat16 (--dtype bfloat16); quantized ones stay.
  bool bf16_matrices = false;
  // The slice to pack: Megatron-style, Q/K/V and gate/up by output rows (whole heads), O and
  // down by input columns; norms, the embedding and the output projection whole.
  ShardSpec shard;
};

// Packs `checkpoint` (this rank's slice of it) for the CPU kernels. InvalidArgument naming the
// tensor when one has a type the CPU cannot use (a non-dequantizable type), or when the world
// size does not divide the heads, KV heads or intermediate size, or would cut a quantization
// block of a row-parallel matrix.
absl::StatusOr<std::unique_ptr<LlamaWeights>> PackLlamaWeights(
    std::shared_ptr<const ModelCheckpoint> checkpoint, const LlamaPackOptions& options = {});

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_CPU_LLAMA_WEIGHTS_H_
