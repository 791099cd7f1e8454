#include "worker/backend/cuda/cuda_device_backend.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/backend/adapter_slots.h"
#include "worker/backend/cuda/cuda_model.h"
#include "worker/backend/cuda/device_kv_pool.h"
#include "worker/backend/cuda/device_memory.h"
#include "worker/backend/cuda/device_sampler.h"
#include "worker/backend/cuda/device_weights.h"
#include "worker/backend/step_arrays.h"

namespace pagellm::cuda {
namespace {

class CudaBackend : public Backend {
 public:
  // `engine_blocks`: the pool's blocks the engine may use (one fewer than the pool when decode
  // graphs hold a pad block).
  CudaBackend(std::shared_ptr<const ModelCheckpoint> checkpoint, cudaStream_t stream,
              std::unique_ptr<CudaModel> model, std::unique_ptr<DeviceKvPool> pool,
              int64_t engine_blocks, const CudaBackendOptions& options)
      : checkpoint_(std::move(checkpoint)),
        stream_(stream),
        model_(std::move(model)),
        pool_(std::move(pool)),
        engine_blocks_(engine_blocks),
        options_(options),
        adapters_(options.lora_adapters, options.max_loras) {}
  ~CudaBackend() override {
    (void)OnDevice();
    model_.reset();
    pool_.reset();
    cudaStreamDestroy(stream_);
  }

  const ModelConfig& config() const override { return model_->config(); }
  std::string name() const override { return "cuda"; }
  int64_t block_size() const override { return pool_->options().block_size; }
  int64_t max_batch_tokens() const override { return options_.max_batch_tokens; }
  int64_t max_logits_rows() const override { return model_->max_logits_rows(); }
  int64_t num_kv_blocks() const override { return engine_blocks_; }
  int64_t num_swap_blocks() const override { return pool_->options().num_swap_blocks; }
  const std::vector<std::string>& adapter_names() const override { return adapters_.names(); }
  bool adapters_can_change() const override { return !adapters_.names().empty(); }
  absl::Status SetAdapter(int32_t slot, std::shared_ptr<const LoraAdapter> adapter) override {
    RETURN_IF_ERROR(adapters_.Check(slot, adapter.get()));
    std::unique_ptr<LoraAdapter> slice;
    if (adapter != nullptr) {
      ASSIGN_OR_RETURN(slice, ShardLoraAdapter(*adapter, options_.shard));
    }
    RETURN_IF_ERROR(OnDevice());
    RETURN_IF_ERROR(model_->SetAdapter(slot, slice.get()));
    adapters_.Set(slot, adapter.get());
    return absl::OkStatus();
  }

  absl::Status Forward(const ForwardBatch& batch, const SamplingBatch& sampling,
                       SamplerOutput* out) override {
    last_logits_rows_ = 0;
    if (options_.validate_batches) RETURN_IF_ERROR(ValidateForwardBatch(batch, limits()));
    RETURN_IF_ERROR(OnDevice());
    RETURN_IF_ERROR(model_->Forward(batch, *pool_));
    last_logits_rows_ = batch.num_logits;
    // A step with collectives is waited for with the group's timeout before anything else
    // waits on the stream without one.
    if (options_.communicator != nullptr) RETURN_IF_ERROR(model_->Sync("forward step"));
    return sampler_.Sample(model_->logits(), batch.num_logits, sampling, out);
  }

  absl::Status ForwardDiscardLogits(const ForwardBatch& batch) override {
    return ForwardLogits(batch, nullptr);
  }

  // `logits` null (ForwardDiscardLogits): the step runs and nothing is copied back.
  absl::Status ForwardLogits(const ForwardBatch& batch, float* logits) override {
    last_logits_rows_ = 0;
    if (options_.validate_batches) {
      RETURN_IF_ERROR(ValidateForwardBatch(batch, limits()));
    }
    RETURN_IF_ERROR(OnDevice());
    RETURN_IF_ERROR(model_->Forward(batch, *pool_));
    last_logits_rows_ = batch.num_logits;
    if (options_.communicator != nullptr) RETURN_IF_ERROR(model_->Sync("forward step"));
    const int64_t bytes = batch.num_logits * config().vocab_size * sizeof(float);
    if (bytes > 0 && logits != nullptr) {
      RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(logits, model_->logits(), bytes, cudaMemcpyDeviceToHost, stream_),
          "copying logits"));
    }
    return CudaStatus(cudaStreamSynchronize(stream_), "forward step");
  }

  absl::Status FinalHidden(std::span<const int32_t> rows, float* out) override {
    for (int32_t r : rows) {
      if (r < 0 || r >= last_logits_rows_) {
        return absl::InvalidArgumentError(
            absl::StrCat("hidden state of row ", r, ": the last step had ", last_logits_rows_));
      }
    }
    RETURN_IF_ERROR(OnDevice());
    return model_->CopyFinalHidden(rows, out);
  }

  absl::Status CopyKv(std::span<const KvCopy> copies) override {
    RETURN_IF_ERROR(OnDevice());
    return pool_->CopyKv(copies);
  }

 private:
  // The CUDA runtime's current device is per thread, and the engine's thread is not the one that
  // made the backend: every entry point selects this backend's GPU (--gpu-id, or a
  // tensor-parallel rank's) first. A few hundred nanoseconds a step.
  absl::Status OnDevice() const {
    return CudaStatus(cudaSetDevice(options_.device_id), "selecting the GPU");
  }

  std::shared_ptr<const ModelCheckpoint> checkpoint_;
  cudaStream_t stream_;
  std::unique_ptr<CudaModel> model_;
  std::unique_ptr<DeviceKvPool> pool_;
  const int64_t engine_blocks_;
  int64_t last_logits_rows_ = 0;  // of the last step: rows FinalHidden may read
  const CudaBackendOptions options_;
  AdapterSlots adapters_;
  DeviceSampler sampler_{model_->config().vocab_size, stream_};
};

// One step of max_batch_tokens tokens (sequences of up to the context length, each over its own
// blocks of a scratch pool) and max_logits_rows logits rows: the activation peak.
absl::Status ProfileStep(CudaModel& model, const DeviceKvPoolOptions& kv, int64_t tokens,
                         int64_t logits_rows, cudaStream_t stream) {
  const ModelConfig& c = model.config();
  const int64_t bs = kv.block_size;
  const int64_t seq_len = std::min<int64_t>(tokens, c.max_position_embeddings);
  const int64_t seqs = (tokens + seq_len - 1) / seq_len;
  DeviceKvPoolOptions o = kv;
  o.num_blocks = seqs * ((seq_len + bs - 1) / bs);
  o.num_swap_blocks = 0;
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceKvPool> pool, DeviceKvPool::Create(o, stream));
  StepArrays step(bs, (c.max_position_embeddings + bs - 1) / bs);
  int32_t next_block = 0;
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t n = std::min(seq_len, tokens - s * seq_len);
    std::vector<int32_t> ids(n, 0), blocks((n + bs - 1) / bs);
    for (int32_t& b : blocks) b = next_block++;
    // The last sequence's last logits_rows tokens want logits (at most its length).
    step.AddRow(ids, 0, blocks, s + 1 == seqs ? std::max<int64_t>(0, n - logits_rows) : n);
  }
  RETURN_IF_ERROR(model.Forward(step.batch(), *pool));
  return model.Sync("the profiling step");
}

// The smallest of every rank's `blocks` (block ids must mean the same on every rank), through
// the group's device communicator; `blocks` itself for a single rank.
absl::StatusOr<int64_t> AgreeOnBlocks(DeviceCommunicator* comm, int64_t blocks) {
  if (comm == nullptr) return blocks;
  // Counts travel as fp32, exact below 2^24 blocks.
  constexpr int64_t kMaxBlocks = int64_t{1} << 24;
  const float mine = static_cast<float>(std::min(blocks, kMaxBlocks));
  const int n = comm->world_size();
  ASSIGN_OR_RETURN(DeviceBuffer buf,
                   DeviceBuffer::Allocate((n + 1) * sizeof(float), "block counts"));
  float* d = buf.as<float>();
  RETURN_IF_ERROR(
      CudaStatus(cudaMemcpy(d, &mine, sizeof(float), cudaMemcpyHostToDevice), "block counts"));
  // From pageable memory cudaMemcpy may return before its DMA lands, and the communicator's
  // stream does not wait for the legacy default stream: wait for the device here.
  RETURN_IF_ERROR(CudaStatus(cudaDeviceSynchronize(), "block counts"));
  RETURN_IF_ERROR(comm->AllGather(d, 1, d + 1));
  std::vector<float> all(n);
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpy(all.data(), d + 1, n * sizeof(float), cudaMemcpyDeviceToHost), "block counts"));
  return static_cast<int64_t>(*std::min_element(all.begin(), all.end()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaDeviceBackend(
    std::shared_ptr<const ModelCheckpoint> checkpoint, const CudaUploadPlan& plan,
    const CudaBackendOptions& o) {
  int devices = 0;
  const cudaError_t count_err = cudaGetDeviceCount(&devices);
  if (count_err != cudaSuccess || devices == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device found (",
        count_err == cudaSuccess ? "0 devices" : cudaGetErrorName(count_err),
        count_err == cudaSuccess ? "" : absl::StrCat(": ", cudaGetErrorString(count_err)), ")"));
  }
  if (o.device_id < 0 || o.device_id >= devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu-id ", o.device_id, ": ", devices, " CUDA device(s)"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(o.device_id), "selecting the GPU"));
  cudaDeviceProp prop;
  RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&prop, o.device_id), "reading the GPU"));
  cudaStream_t stream = nullptr;
  RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "creating the compute stream"));
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() {
      if (s != nullptr) cudaStreamDestroy(s);
    }
  } guard{stream};

  const ModelConfig& c = checkpoint->config;
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceWeights> weights,
                   UploadWeights(*checkpoint, plan, stream));
  const int64_t weight_bytes = weights->bytes, converted = weights->converted_tensors;
  const int64_t dequantized = weights->dequantized_tensors;
  const kernels::KvDtype dtype = weights->dtype;
  CudaModelOptions mo;
  mo.max_batch_tokens = o.max_batch_tokens;
  mo.max_logits_rows = std::min(o.max_num_seqs + kMaxScoredRowsPerStep, o.max_batch_tokens);
  mo.max_decode_rows = std::min(o.max_num_seqs, o.max_batch_tokens);
  mo.block_size = o.block_size;
  mo.num_sms = prop.multiProcessorCount;
  mo.comm = o.communicator;
  mo.shard = o.shard;
  mo.max_loras = o.max_loras;
  mo.max_lora_rank = o.max_lora_rank;
  for (const auto& adapter : o.lora_adapters) {
    ASSIGN_OR_RETURN(std::unique_ptr<LoraAdapter> slice, ShardLoraAdapter(*adapter, o.shard));
    mo.lora_adapters.push_back(std::move(slice));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CudaModel> model,
                   CudaModel::Create(*checkpoint, std::move(weights), mo, stream));

  // A rank's pool holds its KV heads, under the same block ids on every rank.
  DeviceKvPoolOptions kv;
  kv.num_layers = c.num_layers;
  kv.num_kv_heads = model->local_config().num_kv_heads;
  kv.head_dim = c.head_dim;
  kv.block_size = o.block_size;
  kv.dtype = dtype;
  const int64_t block_bytes = DeviceKvPool::BlockBytes(kv);
  kv.num_blocks = o.num_kv_blocks;
  if (kv.num_blocks <= 0) {
    RETURN_IF_ERROR(ProfileStep(*model, kv, o.max_batch_tokens, mo.max_logits_rows, stream));
    size_t free = 0, total = 0;
    RETURN_IF_ERROR(CudaStatus(cudaMemGetInfo(&free, &total), "reading free device memory"));
    const double budget =
        static_cast<double>(total) * o.gpu_memory_utilization - static_cast<double>(total - free);
    kv.num_blocks = budget > 0 ? static_cast<int64_t>(budget / block_bytes) : 0;
    if (kv.num_blocks <= 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "no room for the KV cache: ", (total - free) >> 20, " MiB of ", total >> 20,
          " MiB are in use after loading; raise --gpu-memory-utilization (",
          o.gpu_memory_utilization, ") or use a smaller model or --max-num-batched-tokens"));
    }
  }
  ASSIGN_OR_RETURN(kv.num_blocks, AgreeOnBlocks(o.communicator, kv.num_blocks));
  kv.num_swap_blocks = o.swap_space_bytes / block_bytes;
  // Decode graphs write their pad rows to one extra block the engine never gets.
  if (!o.enforce_eager) ++kv.num_blocks;
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceKvPool> pool, DeviceKvPool::Create(kv, stream));
  const int64_t engine_blocks = o.enforce_eager ? kv.num_blocks : kv.num_blocks - 1;
  if (!o.enforce_eager) {
    RETURN_IF_ERROR(model->CaptureDecodeGraphs(*pool, static_cast<int32_t>(kv.num_blocks - 1)));
  }
  PLOG_INFO(
      "cuda backend: GPU {} {} ({} SMs, {} MiB){}; weights {} MiB ({}{}), scratch {} MiB; KV {} "
      "blocks of {} tokens ({} MiB), swap {} blocks ({} MiB pinned); decode {}",
      o.device_id, prop.name, prop.multiProcessorCount, prop.totalGlobalMem >> 20,
      o.shard.world_size > 1
          ? absl::StrCat(", tensor-parallel rank ", o.shard.rank, " of ", o.shard.world_size)
          : std::string(),
      weight_bytes >> 20, dtype == kernels::KvDtype::kF16 ? "float16" : "bfloat16",
      converted > 0
          ? absl::StrCat(", ", converted, " tensors converted at load",
                         dequantized > 0 ? absl::StrCat(", ", dequantized,
                                                        " of them dequantized from quantized GGUF "
                                                        "blocks: no quantized GPU kernels yet")
                                         : std::string())
          : std::string(),
      model->scratch_bytes() >> 20, engine_blocks, kv.block_size,
      (kv.num_blocks * block_bytes) >> 20, kv.num_swap_blocks,
      (kv.num_swap_blocks * block_bytes) >> 20,
      o.enforce_eager ? "eager (--enforce-eager)" : "steps replay CUDA graphs");
  guard.s = nullptr;
  return std::unique_ptr<Backend>(new CudaBackend(std::move(checkpoint), stream, std::move(model),
                                                  std::move(pool), engine_blocks, o));
}

}  // namespace pagellm::cuda
