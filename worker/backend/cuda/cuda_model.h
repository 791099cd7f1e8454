// CudaModel: the forward pass of a Llama-family decoder on one GPU over the paged device pool.
//
// Forward() uploads the batch's arrays (one pinned staging buffer, one async copy), then runs
// embedding gather -> per layer: fused residual-add + RMSNorm, one cuBLAS GEMM for Q/K/V, RoPE
// fused with the paged K/V write (and the Qwen2 bias), paged attention, the O GEMM, fused
// residual-add + RMSNorm, one GEMM for gate/up, SiLU-and-mul, the down GEMM -> the final norm of
// the logits rows only and the LM head, into fp32 device logits. Matrix products are bf16/fp16 in,
// fp32 accumulate. Scratch is sized for max_batch_tokens at creation, so a step allocates nothing.
// All-decode steps replay CUDA graphs captured per padded batch size (CaptureDecodeGraphs).
//
// Tensor parallelism (Megatron-style; the weights are one rank's shard): the rank computes its
// heads and its slice of the MLP, and the O and down products -- partial sums over the rank's
// input columns -- are all-reduced (in the compute type, as vLLM does) before the residual add.
// A vocabulary-parallel embedding writes zeros for other ranks' ids and is all-reduced in fp32
// (exact: one term is non-zero); a vocabulary-parallel LM head's logits are all-gathered and
// interleaved into whole rows, so every rank ends the step with the same logits. The collectives
// are enqueued between the kernels (and captured in the decode graphs); Sync() waits for them
// with the communicator's timeout.
//
// Not thread-safe: the engine thread calls Forward().
#ifndef PAGELLM_WORKER_BACKEND_CUDA_CUDA_MODEL_H_
#define PAGELLM_WORKER_BACKEND_CUDA_CUDA_MODEL_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/lora.h"
#include "kernels/cuda/prefill_attention.h"
#include "worker/backend/cuda/cublas_api.h"
#include "worker/backend/cuda/device_kv_pool.h"
#include "worker/backend/cuda/device_memory.h"
#include "worker/backend/cuda/device_weights.h"
#include "worker/backend/forward_batch.h"
#include "worker/dist/device_communicator.h"
#include "worker/model/lora_adapter.h"
#include "worker/model/model_checkpoint.h"

namespace pagellm::cuda {

struct CudaModelOptions {
  int64_t max_batch_tokens = 2048;
  int64_t max_logits_rows = 256;  // most logits rows per step (<= max_batch_tokens)
  // Most rows of an all-decode step (<= max_logits_rows): the largest captured graph.
  int64_t max_decode_rows = 256;
  int64_t block_size = 16;
  int num_sms = 132;  // multiprocessors, for the attention split
  // Tensor parallelism (the weights are this rank's shard): the group's collectives, borrowed.
  // Null for a single rank.
  DeviceCommunicator* comm = nullptr;
  ShardSpec shard;
  // LoRA adapters, already this rank's slices (ShardLoraAdapter), indexed by
  // ForwardBatch::seq_adapter: uploaded in fp32, applied after each adapted GEMM.
  std::vector<std::shared_ptr<const LoraAdapter>> lora_adapters;
  // Adapter slots in all (SetAdapter; at least lora_adapters.size()), each a device region
  // reserved at start for an adapter of rank <= max(max_lora_rank, lora_adapters' ranks) on every
  // module, so that loading one while serving allocates nothing.
  int64_t max_loras = 0;
  int64_t max_lora_rank = 16;
};

class CudaModel {
 public:
  // Takes the uploaded weights; allocates scratch for opts.max_batch_tokens tokens and the RoPE
  // table. `stream` is borrowed (the backend's compute stream). ResourceExhausted when the
  // scratch does not fit.
  static absl::StatusOr<std::unique_ptr<CudaModel>> Create(const ModelCheckpoint& checkpoint,
                                                           std::unique_ptr<DeviceWeights> weights,
                                                           const CudaModelOptions& opts,
                                                           cudaStream_t stream);
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  // The whole model's configuration (vocabulary, heads); a rank computes local_config()'s heads.
  const ModelConfig& config() const { return config_; }
  const ModelConfig& local_config() const { return local_; }
  const DeviceWeights& weights() const { return *weights_; }
  // Device bytes of the scratch buffers (activations, batch arrays, attention workspace).
  [[nodiscard]] int64_t scratch_bytes() const { return scratch_bytes_; }
  [[nodiscard]] int64_t max_logits_rows() const { return opts_.max_logits_rows; }

  // Runs `batch` and leaves batch.num_logits rows of vocab_size fp32 logits in device memory
  // (logits(), valid until the next call), enqueued on the stream (not synchronized).
  // InvalidArgument for more tokens or logits rows than the scratch holds, or a block-table
  // stride beyond the model's context. REQUIRES: the batch meets forward_batch.h's contract for
  // `pool` (the caller validated it).
  // An all-decode batch of up to the largest captured size replays that size's graph, its rows
  // padded.
  absl::Status Forward(const ForwardBatch& batch, const DeviceKvPool& pool);
  [[nodiscard]] const float* logits() const { return logits_.as<float>(); }
  // Copies the final norm's output (the LM head's input, in the compute type on the device) of
  // logits rows `rows` of the last Forward to `out` as fp32, hidden_size floats per row, and
  // waits for the stream. REQUIRES: rows below that Forward's num_logits.
  absl::Status CopyFinalHidden(std::span<const int32_t> rows, float* out);

  // Waits for everything enqueued on the stream: through the communicator (bounded by its
  // timeout; a peer's failure is Unavailable) under tensor parallelism, else
  // cudaStreamSynchronize. `what` names the wait in errors.
  absl::Status Sync(const char* what);

  // Captures one CUDA graph per padded decode size (1, 2, 4, 8, 16, 24, 32, 48, ... up to
  // max_logits_rows) over `pool`, which must outlive the model; pad rows write to `pad_block`,
  // a block the engine never gets. Attention in a graph is split for the model's full context.
  absl::Status CaptureDecodeGraphs(const DeviceKvPool& pool, int32_t pad_block);

  // Puts `adapter` (this rank's slice; null: none) in adapter slot `slot` between steps: its
  // matrices go to the slot's reserved region and the slot table the kernels (and the captured
  // graphs) read points at them. InvalidArgument when the slot does not exist or the adapter
  // does not fit it.
  absl::Status SetAdapter(int64_t slot, const LoraAdapter* adapter);

 private:
  CudaModel() = default;
  // y[rows][n_out] = x[rows][n_in] W^T with W [n_out][n_in], in `out_type` (compute type or fp32).
  absl::Status Gemm(const void* w, int64_t n_out, int64_t n_in, const void* x, int64_t rows,
                    void* y, bool fp32_out);
  // Byte offsets of the batch arrays in the staging and device blocks, for `tokens` tokens.
  struct BatchLayout {
    BatchLayout() = default;
    BatchLayout(int64_t tokens, int64_t table_stride);
    int64_t slots = 0, ids = 0, pos = 0, seq = 0, logit_rows = 0, tiles = 0, other = 0, tables = 0,
            adapter = 0, total = 0;
  };
  // What Enqueue needs to know of a step beyond its token count.
  struct StepShape {
    int64_t num_logits = 0;
    int64_t max_context = 0;  // the longest context among the tokens of paged_attention.h
    // Prefill tiles (kernels/cuda/prefill_attention.h) at d_tiles_; 0: every token goes through
    // paged_attention.h. Otherwise the num_other tokens listed at d_other_ do.
    int64_t num_tiles = 0;
    int64_t num_other = 0;
  };
  struct DecodeGraph {
    int64_t rows = 0;
    cudaGraphExec_t exec = nullptr;
  };

  // Copies the batch's arrays to the device, padded to `padded_rows` rows (0: none, and then
  // prefill chunks are tiled for the tensor-core kernel); returns the step's shape.
  absl::StatusOr<StepShape> UploadBatch(const ForwardBatch& b, int64_t padded_rows);
  // Launches the whole step for n tokens whose arrays are on the device (no host work, no
  // synchronization: capturable).
  absl::Status Enqueue(int64_t n, const StepShape& shape, const DeviceKvPool& pool);

  // Reserves the adapter slots and uploads opts_.lora_adapters into the first (Create).
  // InvalidArgument when one does not fit the weights.
  absl::Status UploadAdapters();
  // InvalidArgument unless `a` (this rank's slice) fits the weights and a slot's region.
  [[nodiscard]] absl::Status CheckAdapter(const LoraAdapter& a) const;
  // Points slot `slot`'s table entries at `a`'s matrices, uploaded into the slot's region (null:
  // no adapter), and uploads the table. Waits for the stream.
  absl::Status FillSlot(int64_t slot, const LoraAdapter* a);
  // y += the adapters' product for module m of `layer` over the n tokens' rows (kernels/cuda/
  // lora.h); nothing when no adapter is served.
  absl::Status AddLora(int64_t layer, LoraModule m, const void* x, int64_t ldx, void* y,
                       int64_t ldy, int64_t n);

  // Enqueues an all-reduce of n elements of `data` when the model is tensor-parallel.
  absl::Status AllReduce(void* data, int64_t n, bool fp32);

  ModelConfig config_;
  ModelConfig local_;  // this rank's dimensions (== config_ for a single rank)
  bool rope_neox_ = true;
  CudaModelOptions opts_;
  cudaStream_t stream_ = nullptr;
  const CublasApi* blas_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<DeviceWeights> weights_;
  int64_t max_table_stride_ = 0;
  int64_t max_split_rows_ = 0;
  int64_t scratch_bytes_ = 0;

  DeviceBuffer rope_;  // [max_position][head_dim] fp32
  // A vocabulary-parallel LM head's rows, then every rank's (all-gathered); empty otherwise.
  DeviceBuffer logits_shard_, logits_gathered_;
  std::vector<uint16_t> hidden_host_;  // CopyFinalHidden's staging, grown to the rows asked
  DeviceBuffer residual_, hidden_, qkv_, attn_, sub_out_, gate_up_, act_, logits_, attn_ws_;
  DeviceBuffer cublas_ws_;
  // Batch arrays: one pinned staging block mirrored by one device block, at fixed offsets.
  BatchLayout layout_;
  PinnedBuffer batch_host_;
  DeviceBuffer batch_device_;
  int32_t *d_ids_ = nullptr, *d_pos_ = nullptr, *d_seq_ = nullptr, *d_tables_ = nullptr,
          *d_logit_rows_ = nullptr;
  int64_t* d_slots_ = nullptr;
  kernels::cuda::PrefillTile* d_tiles_ = nullptr;
  int32_t* d_other_ = nullptr;
  int prefill_tile_tokens_ = 0;  // 0: no tensor-core prefill for this model's GQA ratio
  std::vector<kernels::cuda::PrefillTile> tiles_;  // UploadBatch's scratch
  std::vector<int32_t> other_;
  // LoRA: the adapters' fp32 matrices, their slots [layer][module][adapter], the per-token adapter
  // (in the batch block) and the shrink's [max_batch_tokens][max rank] scratch.
  DeviceBuffer lora_weights_, lora_slots_, lora_u_;
  std::vector<kernels::cuda::LoraSlot> lora_table_;  // the host copy of lora_slots_
  int32_t* d_adapter_ = nullptr;
  int32_t lora_max_rank_ = 0;     // every slot's capacity
  int64_t lora_slot_floats_ = 0;  // one slot's region
  int64_t num_adapters_ = 0;      // slots
  int32_t pad_block_ = 0;
  std::vector<DecodeGraph> graphs_;  // by rows, ascending; empty when eager
};

}  // namespace pagellm::cuda

#endif  // PAGELLM_WORKER_BACKEND_CUDA_CUDA_MODEL_H_
