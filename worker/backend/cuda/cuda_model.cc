// The residual stream is fp32 ([tokens][hidden]); every sub-layer's output is in the compute
// type and is added to it by the next fused AddRmsNorm, so the stream is rounded never and each
// sub-layer input once. The final norm gathers the logits rows (ForwardBatch::logit_indices) and
// adds the last MLP output to those rows only.
#include "worker/backend/cuda/cuda_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "common/status_macros.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/lora.h"
#include "kernels/cuda/paged_attention.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rope_kv.h"
#include "worker/model/rope_table.h"

namespace pagellm::cuda {
namespace {

using kernels::KvDtype;

constexpr int64_t kCublasWorkspaceBytes = 32ll << 20;

cudaDataType_t CudaType(KvDtype t) { return t == KvDtype::kF16 ? CUDA_R_16F : CUDA_R_16BF; }

absl::Status CublasStatus(const CublasApi& api, cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string msg =
      absl::StrCat(what, ": cuBLAS ", api.status_name(s), " (", api.status_string(s), ")");
  if (s == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

}  // namespace

CudaModel::BatchLayout::BatchLayout(int64_t tokens, int64_t table_stride) {
  auto align16 = [](int64_t x) { return (x + 15) / 16 * 16; };
  slots = 0;
  ids = align16(slots + tokens * 8);
  pos = align16(ids + tokens * 4);
  seq = align16(pos + tokens * 4);
  logit_rows = align16(seq + tokens * 4);
  tiles = align16(logit_rows + tokens * 4);
  other = align16(tiles + tokens * static_cast<int64_t>(sizeof(kernels::cuda::PrefillTile)));
  tables = align16(other + tokens * 4);
  adapter = align16(tables + tokens * table_stride * 4);
  total = align16(adapter + tokens * 4);
}

absl::StatusOr<std::unique_ptr<CudaModel>> CudaModel::Create(const ModelCheckpoint& checkpoint,
                                                             std::unique_ptr<DeviceWeights> weights,
                                                             const CudaModelOptions& opts,
                                                             cudaStream_t stream) {
  const ModelConfig& c = checkpoint.config;
  RETURN_IF_ERROR(c.Validate());
  if (opts.max_batch_tokens <= 0 || opts.max_batch_tokens > (1 << 20) ||
      opts.max_logits_rows <= 0 || opts.max_logits_rows > opts.max_batch_tokens ||
      opts.max_decode_rows <= 0 || opts.max_decode_rows > opts.max_logits_rows) {
    return absl::InvalidArgumentError(absl::StrCat("bad max batch tokens ", opts.max_batch_tokens));
  }
  if (c.head_dim != 64 && c.head_dim != 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_dim ", c.head_dim, " on the GPU (64 or 128)"));
  }
  if (opts.comm != nullptr &&
      (opts.comm->rank() != opts.shard.rank || opts.comm->world_size() != opts.shard.world_size)) {
    return absl::InvalidArgumentError("the communicator is not the shard's group");
  }
  if (opts.comm == nullptr && opts.shard.world_size != 1) {
    return absl::InvalidArgumentError("a tensor-parallel shard needs a communicator");
  }
  std::unique_ptr<CudaModel> m(new CudaModel());
  m->config_ = c;
  ASSIGN_OR_RETURN(m->local_, RankConfig(c, opts.shard));
  m->rope_neox_ = checkpoint.rope_neox;
  m->opts_ = opts;
  m->stream_ = stream;
  m->weights_ = std::move(weights);
  const DeviceWeights& w = *m->weights_;
  if (w.vocab_rows <= 0 || w.vocab_begin < 0 || w.vocab_begin + w.vocab_rows > c.vocab_size ||
      (w.vocab_rows != c.vocab_size && w.vocab_rows * opts.shard.world_size != c.vocab_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary rows ", w.vocab_begin, " + ", w.vocab_rows, " of ", c.vocab_size));
  }
  const ModelConfig& lc = m->local_;
  const int64_t t = opts.max_batch_tokens, eb = kernels::KvDtypeBytes(w.dtype);
  const int64_t q_dim = lc.num_heads * c.head_dim, kv_dim = lc.num_kv_heads * c.head_dim;
  m->max_table_stride_ = (c.max_position_embeddings + opts.block_size - 1) / opts.block_size;
  // Splits are for small steps; 4096 (token, split) rows covers a 64-way split of 64 tokens.
  m->max_split_rows_ = 4096;

  const std::vector<float> table = RopeCosSinTable(c, m->weights_->rope_freq_factors);
  auto alloc = [&](DeviceBuffer* b, int64_t bytes, const char* what) -> absl::Status {
    ASSIGN_OR_RETURN(*b, DeviceBuffer::Allocate(bytes, what));
    m->scratch_bytes_ += bytes;
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(alloc(&m->rope_, table.size() * sizeof(float), "the RoPE table"));
  RETURN_IF_ERROR(alloc(&m->residual_, t * c.hidden_size * 4, "activations"));
  RETURN_IF_ERROR(alloc(&m->hidden_, t * c.hidden_size * eb, "activations"));
  RETURN_IF_ERROR(alloc(&m->qkv_, t * (q_dim + 2 * kv_dim) * eb, "activations"));
  RETURN_IF_ERROR(alloc(&m->attn_, t * q_dim * eb, "activations"));
  RETURN_IF_ERROR(alloc(&m->sub_out_, t * c.hidden_size * eb, "activations"));
  RETURN_IF_ERROR(alloc(&m->gate_up_, t * 2 * lc.intermediate_size * eb, "activations"));
  RETURN_IF_ERROR(alloc(&m->act_, t * lc.intermediate_size * eb, "activations"));
  RETURN_IF_ERROR(alloc(&m->logits_, opts.max_logits_rows * c.vocab_size * 4, "logits"));
  if (w.vocab_rows != c.vocab_size) {
    RETURN_IF_ERROR(
        alloc(&m->logits_shard_, opts.max_logits_rows * w.vocab_rows * 4, "logits (this rank's)"));
    RETURN_IF_ERROR(
        alloc(&m->logits_gathered_, opts.max_logits_rows * c.vocab_size * 4, "logits (gathered)"));
  }
  // (token, split) rows of partial outputs, maxima and sums.
  RETURN_IF_ERROR(alloc(&m->attn_ws_, m->max_split_rows_ * lc.num_heads * (c.head_dim + 2) * 4,
                        "the attention workspace"));
  RETURN_IF_ERROR(alloc(&m->cublas_ws_, kCublasWorkspaceBytes, "the cuBLAS workspace"));
  m->layout_ = BatchLayout(t, m->max_table_stride_);
  const BatchLayout& layout = m->layout_;
  RETURN_IF_ERROR(alloc(&m->batch_device_, layout.total, "batch arrays"));
  ASSIGN_OR_RETURN(m->batch_host_, PinnedBuffer::Allocate(layout.total, "batch arrays"));
  uint8_t* d = m->batch_device_.as<uint8_t>();
  m->d_slots_ = reinterpret_cast<int64_t*>(d + layout.slots);
  m->d_ids_ = reinterpret_cast<int32_t*>(d + layout.ids);
  m->d_pos_ = reinterpret_cast<int32_t*>(d + layout.pos);
  m->d_seq_ = reinterpret_cast<int32_t*>(d + layout.seq);
  m->d_logit_rows_ = reinterpret_cast<int32_t*>(d + layout.logit_rows);
  m->d_tables_ = reinterpret_cast<int32_t*>(d + layout.tables);
  m->d_tiles_ = reinterpret_cast<kernels::cuda::PrefillTile*>(d + layout.tiles);
  m->d_other_ = reinterpret_cast<int32_t*>(d + layout.other);
  m->d_adapter_ = reinterpret_cast<int32_t*>(d + layout.adapter);
  RETURN_IF_ERROR(m->UploadAdapters());
  m->prefill_tile_tokens_ = kernels::cuda::PrefillTileTokens(lc.num_heads, lc.num_kv_heads);

  RETURN_IF_ERROR(CudaStatus(cudaMemcpy(m->rope_.get(), table.data(), table.size() * sizeof(float),
                                        cudaMemcpyHostToDevice),
                             "uploading the RoPE table"));
  // cudaMemcpy from pageable memory may return before its DMA lands, and the compute stream
  // does not wait for the legacy default stream.
  RETURN_IF_ERROR(CudaStatus(cudaDeviceSynchronize(), "uploading the RoPE table"));
  ASSIGN_OR_RETURN(m->blas_, LoadCublas());
  const CublasApi& api = *m->blas_;
  RETURN_IF_ERROR(CublasStatus(api, api.create(&m->cublas_), "creating the cuBLAS handle"));
  RETURN_IF_ERROR(CublasStatus(api, api.set_stream(m->cublas_, stream), "cuBLAS stream"));
  RETURN_IF_ERROR(
      CublasStatus(api, api.set_workspace(m->cublas_, m->cublas_ws_.get(), kCublasWorkspaceBytes),
                   "cuBLAS workspace"));
  return m;
}

CudaModel::~CudaModel() {
  for (DecodeGraph& g : graphs_) cudaGraphExecDestroy(g.exec);
  if (cublas_ != nullptr) blas_->destroy(cublas_);
}

absl::Status CudaModel::Sync(const char* what) {
  if (opts_.comm != nullptr) return opts_.comm->WaitStream(stream_);
  return CudaStatus(cudaStreamSynchronize(stream_), what);
}

absl::Status CudaModel::AllReduce(void* data, int64_t n, bool fp32) {
  if (opts_.comm == nullptr) return absl::OkStatus();
  const CollectiveDtype t = fp32                                        ? CollectiveDtype::kF32
                            : weights_->dtype == kernels::KvDtype::kF16 ? CollectiveDtype::kF16
                                                                        : CollectiveDtype::kBF16;
  return opts_.comm->EnqueueAllReduceSum(data, n, t, stream_);
}

absl::Status CudaModel::Gemm(const void* w, int64_t n_out, int64_t n_in, const void* x,
                             int64_t rows, void* y, bool fp32_out) {
  // Row-major y = x W^T is column-major y^T = W x^T: A = W (n_in x n_out column-major, used
  // transposed), B = x (n_in x rows), C = y^T (n_out x rows).
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = CudaType(weights_->dtype);
  return CublasStatus(*blas_,
                      blas_->gemm_ex(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n_out),
                                     static_cast<int>(rows), static_cast<int>(n_in), &alpha, w, t,
                                     static_cast<int>(n_in), x, t, static_cast<int>(n_in), &beta, y,
                                     fp32_out ? CUDA_R_32F : t, static_cast<int>(n_out),
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      "GEMM");
}

absl::Status CudaModel::CheckAdapter(const LoraAdapter& a) const {
  if (static_cast<int64_t>(a.layers.size()) != local_.num_layers || a.rank <= 0 ||
      a.rank > lora_max_rank_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LoRA adapter ", a.name, " of rank ", a.rank, " does not fit the model's adapter slots (",
        local_.num_layers, " layers, rank <= ", lora_max_rank_, ")"));
  }
  for (const auto& layer : a.layers) {
    for (int m = 0; m < kNumLoraModules; ++m) {
      const LoraMatrix& lm = layer[m];
      if (lm.empty()) continue;
      const auto [n_out, n_in] = LoraModuleShape(local_, static_cast<LoraModule>(m));
      if (lm.n_out != n_out || lm.n_in != n_in ||
          static_cast<int64_t>(lm.a.size()) != a.rank * n_in ||
          static_cast<int64_t>(lm.bt.size()) != a.rank * n_out) {
        return absl::InvalidArgumentError(
            absl::StrCat("LoRA adapter ", a.name, " module ", m, " is [", lm.n_out, ", ", lm.n_in,
                         "], this rank's weights [", n_out, ", ", n_in, "]"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CudaModel::UploadAdapters() {
  const std::vector<std::shared_ptr<const LoraAdapter>>& adapters = opts_.lora_adapters;
  num_adapters_ = std::max<int64_t>(static_cast<int64_t>(adapters.size()), opts_.max_loras);
  if (num_adapters_ == 0) return absl::OkStatus();
  // Every slot's region holds an adapter of the largest rank any may have, on every module.
  int64_t rank = opts_.max_loras > static_cast<int64_t>(adapters.size()) ? opts_.max_lora_rank : 1;
  for (const auto& a : adapters) rank = std::max(rank, a->rank);
  if (rank <= 0 || rank > kLargestLoraRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoRA rank ", rank, " is not in 1..", kLargestLoraRank));
  }
  lora_max_rank_ = static_cast<int32_t>(rank);
  const ModelConfig& lc = local_;
  int64_t per_layer = 0;
  for (int m = 0; m < kNumLoraModules; ++m) {
    const auto [n_out, n_in] = LoraModuleShape(lc, static_cast<LoraModule>(m));
    per_layer += n_in + n_out;
  }
  lora_slot_floats_ = rank * per_layer * lc.num_layers;
  const int64_t floats = lora_slot_floats_ * num_adapters_;
  ASSIGN_OR_RETURN(lora_weights_, DeviceBuffer::Allocate(floats * 4, "LoRA adapters"));
  lora_table_.assign(lc.num_layers * kNumLoraModules * num_adapters_, kernels::cuda::LoraSlot{});
  const int64_t slot_bytes =
      static_cast<int64_t>(lora_table_.size() * sizeof(kernels::cuda::LoraSlot));
  ASSIGN_OR_RETURN(lora_slots_, DeviceBuffer::Allocate(slot_bytes, "LoRA slots"));
  ASSIGN_OR_RETURN(
      lora_u_, DeviceBuffer::Allocate(opts_.max_batch_tokens * lora_max_rank_ * 4, "LoRA scratch"));
  scratch_bytes_ += floats * 4 + slot_bytes + opts_.max_batch_tokens * lora_max_rank_ * 4;
  for (size_t i = 0; i < adapters.size(); ++i) {
    RETURN_IF_ERROR(CheckAdapter(*adapters[i]));
    RETURN_IF_ERROR(FillSlot(static_cast<int64_t>(i), adapters[i].get()));
  }
  return adapters.empty() ? FillSlot(0, nullptr) : absl::OkStatus();  // the table, zeroed
}

absl::Status CudaModel::FillSlot(int64_t slot, const LoraAdapter* a) {
  const ModelConfig& lc = local_;
  // The slot's region: per layer and module, A at full rank [rank][n_in], then B^T [rank][n_out].
  float* region = lora_weights_.as<float>() + slot * lora_slot_floats_;
  std::vector<float> host;
  if (a != nullptr) host.assign(lora_slot_floats_, 0.0f);
  int64_t offset = 0;
  for (int64_t l = 0; l < lc.num_layers; ++l) {
    for (int m = 0; m < kNumLoraModules; ++m) {
      const auto [n_out, n_in] = LoraModuleShape(lc, static_cast<LoraModule>(m));
      kernels::cuda::LoraSlot& s = lora_table_[(l * kNumLoraModules + m) * num_adapters_ + slot];
      s = kernels::cuda::LoraSlot{};
      if (a != nullptr && !a->layers[l][m].empty()) {
        const LoraMatrix& lm = a->layers[l][m];
        std::copy(lm.a.begin(), lm.a.end(), host.begin() + offset);
        std::copy(lm.bt.begin(), lm.bt.end(), host.begin() + offset + lora_max_rank_ * n_in);
        s.a = region + offset;
        s.bt = region + offset + lora_max_rank_ * n_in;
        s.rank = static_cast<int32_t>(a->rank);
      }
      offset += lora_max_rank_ * (n_in + n_out);
    }
  }
  // No step may read the table or the region while they change.
  RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "LoRA slot change"));
  if (a != nullptr) {
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(region, host.data(), host.size() * 4, cudaMemcpyHostToDevice, stream_),
        "uploading a LoRA adapter"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(lora_slots_.get(), lora_table_.data(),
                                             lora_table_.size() * sizeof(kernels::cuda::LoraSlot),
                                             cudaMemcpyHostToDevice, stream_),
                             "uploading the LoRA slots"));
  return CudaStatus(cudaStreamSynchronize(stream_), "uploading a LoRA adapter");
}

absl::Status CudaModel::SetAdapter(int64_t slot, const LoraAdapter* adapter) {
  if (slot < 0 || slot >= num_adapters_) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoRA slot ", slot, " of ", num_adapters_, " slots"));
  }
  if (adapter != nullptr) RETURN_IF_ERROR(CheckAdapter(*adapter));
  return FillSlot(slot, adapter);
}

absl::Status CudaModel::AddLora(int64_t layer, LoraModule m, const void* x, int64_t ldx, void* y,
                                int64_t ldy, int64_t n) {
  if (num_adapters_ == 0) return absl::OkStatus();
  kernels::cuda::LoraParams p;
  p.x = x;
  p.ldx = ldx;
  p.y = y;
  p.ldy = ldy;
  p.dtype = weights_->dtype;
  std::tie(p.n_out, p.n_in) = LoraModuleShape(local_, m);
  p.num_tokens = n;
  p.token_adapter = d_adapter_;
  p.slots =
      lora_slots_.as<kernels::cuda::LoraSlot>() + (layer * kNumLoraModules + m) * num_adapters_;
  p.u = lora_u_.as<float>();
  p.max_rank = lora_max_rank_;
  return CudaStatus(kernels::cuda::LaunchLora(p, stream_), "LoRA");
}

absl::StatusOr<CudaModel::StepShape> CudaModel::UploadBatch(const ForwardBatch& b,
                                                            int64_t padded_rows) {
  if (b.block_table_stride <= 0 || b.block_table_stride > max_table_stride_) {
    return absl::InvalidArgumentError(absl::StrCat("block table stride ", b.block_table_stride,
                                                   " (at most ", max_table_stride_, ")"));
  }
  // Arrays sit at the max_batch_tokens layout's offsets (what captured graphs read); block
  // tables are re-strided to the model's stride, copying only the blocks each row uses.
  const int64_t n = b.num_tokens, rows = std::max(n, padded_rows), bs = opts_.block_size;
  const BatchLayout& l = layout_;
  uint8_t* h = batch_host_.as<uint8_t>();
  auto* slots = reinterpret_cast<int64_t*>(h + l.slots);
  auto* ids = reinterpret_cast<int32_t*>(h + l.ids);
  auto* pos = reinterpret_cast<int32_t*>(h + l.pos);
  auto* seq = reinterpret_cast<int32_t*>(h + l.seq);
  auto* logit_rows = reinterpret_cast<int32_t*>(h + l.logit_rows);
  auto* tables = reinterpret_cast<int32_t*>(h + l.tables);
  if (n > 0) {
    std::memcpy(slots, b.slots, n * 8);
    std::memcpy(ids, b.token_ids, n * 4);
    std::memcpy(pos, b.positions, n * 4);
    std::memcpy(seq, b.token_seq, n * 4);
  }
  auto* adapter = reinterpret_cast<int32_t*>(h + l.adapter);
  if (num_adapters_ > 0) {
    for (int64_t t = 0; t < n; ++t) {
      adapter[t] = b.seq_adapter == nullptr ? -1 : b.seq_adapter[b.token_seq[t]];
    }
    for (int64_t r = n; r < rows; ++r) adapter[r] = -1;
  }
  if (b.num_logits > 0) std::memcpy(logit_rows, b.logit_indices, b.num_logits * 4);
  int64_t max_context = 0, table_rows = b.num_seqs, max_used = 1;
  for (int64_t s = 0; s < b.num_seqs; ++s) {
    const int64_t used = (b.seq_lens[s] + bs - 1) / bs;
    std::memcpy(tables + s * max_table_stride_, b.block_tables + s * b.block_table_stride,
                used * 4);
    max_context = std::max<int64_t>(max_context, b.seq_lens[s]);
    max_used = std::max(max_used, used);
  }
  // Pad rows (a graph's size beyond the batch): one token at position 0 of its own row, in the
  // pad block, logits computed and ignored.
  for (int64_t r = n; r < rows; ++r) {
    slots[r] = static_cast<int64_t>(pad_block_) * bs;
    ids[r] = 0;
    pos[r] = 0;
    seq[r] = static_cast<int32_t>(r);
    logit_rows[r] = static_cast<int32_t>(r);
    tables[r * max_table_stride_] = pad_block_;
  }
  if (rows > n) table_rows = rows;
  StepShape shape{b.num_logits, max_context, 0, 0};
  tiles_.clear();
  if (padded_rows == 0 && !b.all_decode && prefill_tile_tokens_ > 0) {
    kernels::cuda::SplitAttentionStep(b.query_start, b.num_seqs, prefill_tile_tokens_, &tiles_,
                                      &other_);
  }
  if (!tiles_.empty()) {
    shape.num_tiles = static_cast<int64_t>(tiles_.size());
    shape.num_other = static_cast<int64_t>(other_.size());
    shape.max_context = 0;
    for (int32_t t : other_) shape.max_context = std::max<int64_t>(shape.max_context, pos[t] + 1);
    std::memcpy(h + l.tiles, tiles_.data(), tiles_.size() * sizeof(kernels::cuda::PrefillTile));
    std::memcpy(h + l.other, other_.data(), other_.size() * 4);
  }
  uint8_t* d = batch_device_.as<uint8_t>();
  struct Part {
    int64_t offset, bytes;
  };
  for (Part part :
       {Part{l.slots, rows * 8}, Part{l.ids, rows * 4}, Part{l.pos, rows * 4},
        Part{l.seq, rows * 4}, Part{l.logit_rows, std::max(b.num_logits, rows) * 4},
        Part{l.tiles, shape.num_tiles * static_cast<int64_t>(sizeof(kernels::cuda::PrefillTile))},
        Part{l.other, shape.num_other * 4}, Part{l.adapter, num_adapters_ > 0 ? rows * 4 : 0}}) {
    if (part.bytes == 0) continue;
    RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(d + part.offset, h + part.offset, part.bytes,
                                               cudaMemcpyHostToDevice, stream_),
                               "uploading the batch"));
  }
  // The used prefix of each table row: rows x max_used entries, pitched.
  const size_t pitch = static_cast<size_t>(max_table_stride_) * 4;
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpy2DAsync(d + l.tables, pitch, h + l.tables, pitch, static_cast<size_t>(max_used) * 4,
                        static_cast<size_t>(table_rows), cudaMemcpyHostToDevice, stream_),
      "uploading the block tables"));
  return shape;
}

absl::Status CudaModel::Forward(const ForwardBatch& b, const DeviceKvPool& pool) {
  const int64_t n = b.num_tokens;
  if (n <= 0 || n > opts_.max_batch_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", n, " tokens (max ", opts_.max_batch_tokens, ")"));
  }
  if (b.num_logits < 0 || b.num_logits > opts_.max_logits_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(b.num_logits, " logits rows (max ", opts_.max_logits_rows, ")"));
  }
  if (b.all_decode && !graphs_.empty() && n <= graphs_.back().rows) {
    const DecodeGraph* g = &graphs_.front();
    while (g->rows < n) ++g;
    RETURN_IF_ERROR(UploadBatch(b, g->rows).status());
    return CudaStatus(cudaGraphLaunch(g->exec, stream_), "replaying a decode graph");
  }
  ASSIGN_OR_RETURN(const StepShape shape, UploadBatch(b, 0));
  return Enqueue(n, shape, pool);
}

absl::Status CudaModel::CaptureDecodeGraphs(const DeviceKvPool& pool, int32_t pad_block) {
  pad_block_ = pad_block;
  std::vector<int64_t> sizes;
  for (int64_t r :
       {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512}) {
    if (r <= opts_.max_decode_rows) sizes.push_back(r);
  }
  ForwardBatch empty;
  empty.block_table_stride = max_table_stride_;
  for (int64_t rows : sizes) {
    // Every row a pad row; one eager run first, so that nothing initializes lazily in capture.
    RETURN_IF_ERROR(UploadBatch(empty, rows).status());
    const int64_t context = config_.max_position_embeddings;
    const StepShape shape{rows, context, 0, 0};
    RETURN_IF_ERROR(Enqueue(rows, shape, pool));
    RETURN_IF_ERROR(Sync("warming up a decode graph"));
    RETURN_IF_ERROR(CudaStatus(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                               "capturing a decode graph"));
    const absl::Status enqueued = Enqueue(rows, shape, pool);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    RETURN_IF_ERROR(enqueued);
    RETURN_IF_ERROR(CudaStatus(end, "capturing a decode graph"));
    DecodeGraph g;
    g.rows = rows;
    const cudaError_t inst = cudaGraphInstantiate(&g.exec, graph, 0);
    cudaGraphDestroy(graph);
    RETURN_IF_ERROR(CudaStatus(inst, "instantiating a decode graph"));
    graphs_.push_back(g);
  }
  return Sync("capturing decode graphs");
}

absl::Status CudaModel::Enqueue(int64_t n, const StepShape& shape, const DeviceKvPool& pool) {
  namespace k = kernels::cuda;
  const ModelConfig& c = local_;  // this rank's heads and MLP slice
  const DeviceWeights& w = *weights_;
  const int64_t hs = c.hidden_size, hd = c.head_dim, inter = c.intermediate_size;
  const int64_t q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  const int64_t qkv_dim = q_dim + 2 * kv_dim;
  const KvDtype t = w.dtype;
  const bool vocab_split = w.vocab_rows != c.vocab_size;

  RETURN_IF_ERROR(CudaStatus(k::LaunchEmbedding(w.embedding, t, d_ids_, n, hs, w.vocab_begin,
                                                w.vocab_rows, residual_.as<float>(), stream_),
                             "embedding"));
  if (vocab_split) RETURN_IF_ERROR(AllReduce(residual_.get(), n * hs, true));
  k::PagedAttentionParams ap;
  ap.q = qkv_.get();
  ap.q_stride = qkv_dim;
  ap.out = attn_.get();
  ap.out_stride = q_dim;
  ap.token_seq = d_seq_;
  ap.positions = d_pos_;
  ap.block_tables = d_tables_;
  ap.block_table_stride = max_table_stride_;
  ap.num_tokens = shape.num_tiles > 0 ? shape.num_other : n;
  ap.tokens = shape.num_tiles > 0 ? d_other_ : nullptr;
  ap.num_heads = c.num_heads;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ap.plan = k::PlanPagedAttention(ap.num_tokens, c.num_heads, c.num_kv_heads, shape.max_context,
                                  opts_.num_sms, max_split_rows_);
  k::PrefillAttentionParams pa;
  pa.q = qkv_.get();
  pa.q_stride = qkv_dim;
  pa.out = attn_.get();
  pa.out_stride = q_dim;
  pa.token_seq = d_seq_;
  pa.positions = d_pos_;
  pa.block_tables = d_tables_;
  pa.block_table_stride = max_table_stride_;
  pa.tiles = d_tiles_;
  pa.num_tiles = shape.num_tiles;
  pa.num_heads = c.num_heads;
  pa.scale = ap.scale;
  ap.workspace = attn_ws_.as<float>();
  k::RopeKvParams rp;
  rp.qkv = qkv_.get();
  rp.qkv_stride = qkv_dim;
  rp.positions = d_pos_;
  rp.slots = d_slots_;
  rp.cos_sin = rope_.as<float>();
  rp.neox = rope_neox_;
  rp.num_tokens = n;
  rp.num_heads = c.num_heads;
  k::AddRmsNormParams np;
  np.residual = residual_.as<float>();
  np.rows = n;
  np.dim = hs;
  np.eps = c.rms_norm_eps;
  np.dtype = t;
  np.out = hidden_.get();

  for (int64_t li = 0; li < c.num_layers; ++li) {
    const DeviceLayerWeights& l = w.layers[li];
    const kernels::PagedKvLayer kv = pool.layer(li);
    np.add = li == 0 ? nullptr : sub_out_.get();
    np.weight = l.attn_norm;
    RETURN_IF_ERROR(CudaStatus(k::LaunchAddRmsNorm(np, stream_), "attention norm"));
    RETURN_IF_ERROR(Gemm(l.qkv, qkv_dim, hs, hidden_.get(), n, qkv_.get(), false));
    const int64_t eb = kernels::KvDtypeBytes(t);
    auto* qkv = static_cast<uint8_t*>(qkv_.get());
    RETURN_IF_ERROR(AddLora(li, kLoraQ, hidden_.get(), hs, qkv, qkv_dim, n));
    RETURN_IF_ERROR(AddLora(li, kLoraK, hidden_.get(), hs, qkv + q_dim * eb, qkv_dim, n));
    RETURN_IF_ERROR(
        AddLora(li, kLoraV, hidden_.get(), hs, qkv + (q_dim + kv_dim) * eb, qkv_dim, n));
    rp.bias = l.qkv_bias;
    rp.kv = kv;
    RETURN_IF_ERROR(CudaStatus(k::LaunchRopeKv(rp, stream_), "RoPE and KV write"));
    if (pa.num_tiles > 0) {
      pa.kv = kv;
      RETURN_IF_ERROR(CudaStatus(k::LaunchPrefillAttention(pa, stream_), "prefill attention"));
    }
    if (ap.num_tokens > 0) {
      ap.kv = kv;
      RETURN_IF_ERROR(CudaStatus(k::LaunchPagedAttention(ap, stream_), "paged attention"));
    }
    RETURN_IF_ERROR(Gemm(l.o, hs, q_dim, attn_.get(), n, sub_out_.get(), false));
    RETURN_IF_ERROR(AddLora(li, kLoraO, attn_.get(), q_dim, sub_out_.get(), hs, n));
    RETURN_IF_ERROR(AllReduce(sub_out_.get(), n * hs, false));
    np.add = sub_out_.get();
    np.weight = l.ffn_norm;
    RETURN_IF_ERROR(CudaStatus(k::LaunchAddRmsNorm(np, stream_), "MLP norm"));
    RETURN_IF_ERROR(Gemm(l.gate_up, 2 * inter, hs, hidden_.get(), n, gate_up_.get(), false));
    auto* gate_up = static_cast<uint8_t*>(gate_up_.get());
    RETURN_IF_ERROR(AddLora(li, kLoraGate, hidden_.get(), hs, gate_up, 2 * inter, n));
    RETURN_IF_ERROR(AddLora(li, kLoraUp, hidden_.get(), hs, gate_up + inter * eb, 2 * inter, n));
    RETURN_IF_ERROR(
        CudaStatus(k::LaunchSiluMul(gate_up_.get(), n, inter, t, act_.get(), stream_), "SiLU"));
    RETURN_IF_ERROR(Gemm(l.down, hs, inter, act_.get(), n, sub_out_.get(), false));
    RETURN_IF_ERROR(AddLora(li, kLoraDown, act_.get(), inter, sub_out_.get(), hs, n));
    RETURN_IF_ERROR(AllReduce(sub_out_.get(), n * hs, false));
  }
  if (shape.num_logits == 0) return absl::OkStatus();
  np.add = sub_out_.get();
  np.index = d_logit_rows_;
  np.write_residual = false;
  np.rows = shape.num_logits;
  np.weight = w.final_norm;
  RETURN_IF_ERROR(CudaStatus(k::LaunchAddRmsNorm(np, stream_), "final norm"));
  if (!vocab_split) {
    return Gemm(w.lm_head, c.vocab_size, hs, hidden_.get(), shape.num_logits, logits_.get(), true);
  }
  // This rank's vocabulary columns, every rank's after the all-gather ([rank][row][column]), then
  // whole rows.
  const int64_t rows = shape.num_logits, ranks = opts_.shard.world_size;
  RETURN_IF_ERROR(
      Gemm(w.lm_head, w.vocab_rows, hs, hidden_.get(), rows, logits_shard_.get(), true));
  RETURN_IF_ERROR(opts_.comm->EnqueueAllGather(logits_shard_.get(), rows * w.vocab_rows,
                                               CollectiveDtype::kF32, logits_gathered_.get(),
                                               stream_));
  return CudaStatus(k::LaunchInterleaveShards(logits_gathered_.as<float>(), ranks, rows,
                                              w.vocab_rows, logits_.as<float>(), stream_),
                    "interleaving the logits");
}

absl::Status CudaModel::CopyFinalHidden(std::span<const int32_t> rows, float* out) {
  const int64_t hs = config_.hidden_size;
  int32_t needed = 0;
  for (int32_t r : rows) needed = std::max(needed, r + 1);
  if (needed == 0) return absl::OkStatus();
  if (static_cast<int64_t>(hidden_host_.size()) < needed * hs) hidden_host_.resize(needed * hs);
  RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(hidden_host_.data(), hidden_.get(), needed * hs * sizeof(uint16_t),
                                 cudaMemcpyDeviceToHost, stream_),
                 "copying hidden states"));
  RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "copying hidden states"));
  const bool f16 = weights_->dtype == kernels::KvDtype::kF16;
  for (int32_t r : rows) {
    const uint16_t* row = hidden_host_.data() + static_cast<int64_t>(r) * hs;
    for (int64_t j = 0; j < hs; ++j) *out++ = f16 ? HalfToFloat(row[j]) : Bf16ToFloat(row[j]);
  }
  return absl::OkStatus();
}

}  // namespace pagellm::cuda
