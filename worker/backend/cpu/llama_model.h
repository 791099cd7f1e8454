// LlamaModel: the forward pass of a Llama-family decoder on the CPU over a paged KV cache.
//
// One Forward() call runs a flat batch (prefill chunks and decode tokens of many sequences),
// writes each token's K/V into its slot, attends through the block tables and returns logits
// for the requested tokens. Scratch buffers are sized for `max_batch_tokens` at creation and
// reused, so a step allocates nothing.
//
// Tensor parallelism: with a rank's slice of the weights (LlamaWeights::shard), the model computes
// that rank's heads and intermediate columns, and sums the row-parallel products (attention
// output, down projection) over the group with the communicator, so every rank's residual
// stream, and its logits, are the same. Every rank runs the same batches in the same order.
//
// LoRA: each batch row may run one of the model's adapters (ForwardBatch::seq_adapter); an
// adapted projection adds the adapter's low-rank product to the base one, per token, after the
// base product and before any all-reduce (a row-parallel adapter's partial sums join the
// base's). Batches without adapter rows cost nothing extra.
//
// Not thread-safe: one engine thread calls Forward(); kernels fan out on the thread pool.
#ifndef PAGELLM_WORKER_BACKEND_CPU_LLAMA_MODEL_H_
#define PAGELLM_WORKER_BACKEND_CPU_LLAMA_MODEL_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/backend/cpu/kv_cache.h"
#include "worker/backend/cpu/llama_weights.h"
#include "worker/backend/forward_batch.h"
#include "worker/dist/communicator.h"
#include "worker/model/lora_adapter.h"

namespace pagellm {

class LlamaModel {
 public:
  // `pool` and `communicator` are borrowed and must outlive the model. `communicator` may be
  // null for a single rank; InvalidArgument if its rank and size are not the weights' shard.
  // `adapters`: LoRA adapter slots, each null (empty) or an adapter already sliced for this rank
  // (ShardLoraAdapter), indexed by ForwardBatch::seq_adapter; InvalidArgument when one does not
  // fit the weights.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(
      std::unique_ptr<LlamaWeights> weights, int64_t max_batch_tokens, kernels::ThreadPool* pool,
      Communicator* communicator = nullptr,
      std::vector<std::unique_ptr<const LoraAdapter>> adapters = {});
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  const ModelConfig& config() const { return weights_->config; }
  // The dimensions this rank computes (its KV pool holds rank_config().num_kv_heads heads).
  const ModelConfig& rank_config() const { return weights_->rank_config; }

  // Runs the batch; writes batch.num_logits rows of vocab_size floats to `logits` -- on rank 0
  // only when the vocabulary is split over the group (the other ranks' are not written).
  // InvalidArgument for a batch larger than max_batch_tokens, token ids outside the vocabulary
  // or positions beyond the context length; the communicator's error when a collective fails
  // (the cache then holds nothing usable for this batch's slots). REQUIRES: slots and block tables
  // refer to blocks of `cache`, which was created with this model's layer/head shape.
  absl::Status Forward(const ForwardBatch& batch, KvCache* cache, float* logits);
  // After a successful Forward: its num_logits rows of hidden_size floats, the final norm's
  // output (the LM head's input), on every rank. Valid until the next Forward.
  [[nodiscard]] const float* final_hidden() const { return h_; }
  // Puts `adapter` (sliced for this rank; null: none) in slot `slot` between steps; the previous
  // one is freed. InvalidArgument when the slot does not exist or the adapter does not fit.
  // REQUIRES: no later batch names an empty slot.
  absl::Status SetAdapter(int32_t slot, std::unique_ptr<const LoraAdapter> adapter);

 private:
  LlamaModel() = default;
  // fn(begin, end) over row ranges covering [0, rows), on the pool when rows are many.
  template <typename Fn>
  void ByRows(int64_t rows, Fn&& fn);
  // y = x W^T (+ bias) for `rows` rows of x (row stride ldx) into y (row stride ldy).
  struct Product {
    const Matrix* w;
    float* y;
    int64_t ldy;
  };
  // Every product of one input x: the quantized matrices in one parallel region (over qx_,
  // which already holds x quantized when `x_quantized`, else is filled here), the fp32 ones
  // through BLAS, then the biases. N, the number of products, is fixed at the call site.
  template <size_t N>
  void Products(const Product (&products)[N], const float* x, int64_t rows, int64_t ldx,
                bool x_quantized);
  // For each token of a row with an adapter: y_m += the adapter's module m of `layer` applied to
  // x, for the modules of one input x (their outputs at y_m with row stride ldy). One parallel
  // region; nothing when no row of the step has an adapter (lora_rows_).
  struct LoraProduct {
    LoraModule module;
    float* y;
    int64_t ldy;
  };
  template <size_t N>
  void AddLora(const ForwardBatch& b, int64_t layer, const LoraProduct (&products)[N],
               const float* x, int64_t ldx);

  std::unique_ptr<LlamaWeights> weights_;
  std::vector<std::unique_ptr<const LoraAdapter>> adapters_;
  bool lora_rows_ = false;  // the current step has rows with an adapter
  kernels::ThreadPool* pool_ = nullptr;
  Communicator* comm_ = nullptr;  // null, or a group of more than one rank
  int64_t max_tokens_ = 0;
  std::vector<double> inv_freq_;  // RoPE frequencies; each step computes its tokens' angles
  // Scratch, sized for max_tokens_ and left uninitialized, so that only the rows steps use
  // become resident. x_ (the residual stream), h_ (a norm's output) and tmp_ (a product's
  // output) hold hidden_size per token. The attention's qkv_ and attn_ and the MLP's gate_up_
  // are never live together and share one region; SiLU(gate) * up overwrites the gate half.
  std::unique_ptr<float[]> scratch_;
  float *x_ = nullptr, *h_ = nullptr, *tmp_ = nullptr;
  float *qkv_ = nullptr, *attn_ = nullptr, *gate_up_ = nullptr;
  float* rope_rows_ = nullptr;        // [token][head_dim]: the step's (cos, sin) pairs
  std::vector<int32_t> token_index_;  // 0, 1, ..., max_tokens_ - 1: rows of rope_rows_
  // Vocabulary-parallel output projection: this rank's logits, and on rank 0 every rank's.
  std::vector<float> logits_part_, logits_all_;
  kernels::QuantizedActivations qx_;
  kernels::AttentionWorkspace attn_ws_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_CPU_LLAMA_MODEL_H_
