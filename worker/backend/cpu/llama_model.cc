// Forward pass. Per layer: RMSNorm -> Q/K/V projections (one activation quantization shared by
// the three, quantized in the norm's pass, one parallel region for the three products) -> RoPE
// -> K/V written to their slots -> paged attention -> output projection and residual ->
// RMSNorm -> gate/up projections (likewise) -> SiLU * up -> down projection and residual (added
// in the next layer's norm pass). Ten parallel regions a layer.
// Every kernel is row-local or reads the cache by position, so a token's result does not depend
// on what else is in the batch.
#include "worker/backend/cpu/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/f32_matmul.h"
#include "kernels/cpu/lora.h"
#include "kernels/cpu/ops.h"
#include "worker/model/rope_table.h"

namespace pagellm {
namespace {

// The base matrix module m of a layer adapts.
const Matrix& BaseMatrix(const LlamaLayerWeights& l, int m) {
  const Matrix* const matrices[kNumLoraModules] = {&l.wq,     &l.wk,   &l.wv,    &l.wo,
                                                   &l.w_gate, &l.w_up, &l.w_down};
  return *matrices[m];
}

static_assert(kLargestLoraRank <= kernels::kMaxLoraRank, "the kernel takes every loadable rank");

absl::Status CheckAdapterFits(const LoraAdapter& adapter, const LlamaWeights& w) {
  if (adapter.layers.size() != w.layers.size() || adapter.rank <= 0 ||
      adapter.rank > kernels::kMaxLoraRank) {
    return absl::InvalidArgumentError(absl::StrCat("LoRA adapter ", adapter.name, " of rank ",
                                                   adapter.rank, " does not fit the model"));
  }
  for (size_t li = 0; li < w.layers.size(); ++li) {
    for (int m = 0; m < kNumLoraModules; ++m) {
      const LoraMatrix& lm = adapter.layers[li][m];
      const Matrix& base = BaseMatrix(w.layers[li], m);
      if (!lm.empty() && (lm.n_in != base.n_in || lm.n_out != base.n_out ||
                          static_cast<int64_t>(lm.a.size()) != adapter.rank * lm.n_in ||
                          static_cast<int64_t>(lm.bt.size()) != adapter.rank * lm.n_out)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "LoRA adapter ", adapter.name, " layer ", li, " module ", m, " is [", lm.n_out, ", ",
            lm.n_in, "], the weights [", base.n_out, ", ", base.n_in, "]"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(
    std::unique_ptr<LlamaWeights> weights, int64_t max_batch_tokens, kernels::ThreadPool* pool,
    Communicator* communicator, std::vector<std::unique_ptr<const LoraAdapter>> adapters) {
  if (max_batch_tokens <= 0 || max_batch_tokens > (1 << 20))
    return absl::InvalidArgumentError(absl::StrCat("bad max batch tokens ", max_batch_tokens));
  RETURN_IF_ERROR(weights->config.Validate());
  const ShardSpec shard = weights->shard;
  const int comm_size = communicator == nullptr ? 1 : communicator->world_size();
  const int comm_rank = communicator == nullptr ? 0 : communicator->rank();
  if (comm_size != shard.world_size || comm_rank != shard.rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights of rank ", shard.rank, " of ", shard.world_size,
                     " with a communicator of rank ", comm_rank, " of ", comm_size));
  }
  for (const auto& adapter : adapters) {
    if (adapter != nullptr) RETURN_IF_ERROR(CheckAdapterFits(*adapter, *weights));
  }
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->weights_ = std::move(weights);
  m->adapters_ = std::move(adapters);
  m->pool_ = pool;
  m->comm_ = comm_size > 1 ? communicator : nullptr;
  m->max_tokens_ = max_batch_tokens;
  const ModelConfig& c = m->weights_->rank_config;
  const int64_t t = max_batch_tokens;
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  const int64_t hidden = t * c.hidden_size;
  const int64_t shared = t * std::max(2 * q_dim + 2 * kv_dim, 2 * c.intermediate_size);
  const int64_t rope = t * c.head_dim;
  m->scratch_.reset(new float[3 * hidden + shared + rope]);  // uninitialized: see the header
  m->x_ = m->scratch_.get();
  m->h_ = m->x_ + hidden;
  m->tmp_ = m->h_ + hidden;
  m->qkv_ = m->tmp_ + hidden;
  m->attn_ = m->qkv_ + t * (q_dim + 2 * kv_dim);
  m->gate_up_ = m->qkv_;
  m->rope_rows_ = m->qkv_ + shared;
  m->token_index_.resize(t);
  for (int64_t i = 0; i < t; ++i) m->token_index_[i] = static_cast<int32_t>(i);
  m->inv_freq_ = RopeInverseFrequencies(c, m->weights_->rope_freq_factors);
  return m;
}

namespace {
bool IsQuantized(const Matrix& w) { return w.type != GgmlType::kF32 && w.type != GgmlType::kBF16; }
}  // namespace

template <size_t N>
void LlamaModel::Products(const Product (&products)[N], const float* x, int64_t rows, int64_t ldx,
                          bool x_quantized) {
  kernels::QuantMatmulJob jobs[N];
  kernels::Bf16MatmulJob bf16_jobs[N];
  int num_jobs = 0, num_bf16_jobs = 0;
  for (const Product& p : products) {
    if (p.w->type == GgmlType::kBF16) {
      bf16_jobs[num_bf16_jobs++] = {&p.w->bf16, p.y, p.ldy};
    } else if (!IsQuantized(*p.w)) {
      kernels::F32Matmul(x, rows, p.w->n_in, ldx, p.w->f32.data(), p.w->n_out, p.y, p.ldy, pool_);
    } else {
      jobs[num_jobs++] = {&p.w->packed, p.y, p.ldy};
    }
  }
  if (num_bf16_jobs > 0) kernels::Bf16MatmulMany(bf16_jobs, num_bf16_jobs, x, rows, ldx, pool_);
  if (num_jobs > 0) {
    if (!x_quantized) {
      kernels::QuantizeActivations(x, rows, products[0].w->n_in, ldx, &qx_, pool_);
    }
    kernels::QuantMatmulMany(jobs, num_jobs, qx_, pool_);
  }
  for (const Product& p : products) {
    if (p.w->bias.empty()) continue;
    for (int64_t r = 0; r < rows; ++r) {
      kernels::AddInPlace(p.y + r * p.ldy, p.w->bias.data(), p.w->n_out);
    }
  }
}

absl::Status LlamaModel::SetAdapter(int32_t slot, std::unique_ptr<const LoraAdapter> adapter) {
  if (slot < 0 || slot >= static_cast<int64_t>(adapters_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoRA slot ", slot, " of ", adapters_.size(), " slots"));
  }
  if (adapter != nullptr) RETURN_IF_ERROR(CheckAdapterFits(*adapter, *weights_));
  adapters_[slot] = std::move(adapter);
  return absl::OkStatus();
}

template <size_t N>
void LlamaModel::AddLora(const ForwardBatch& b, int64_t layer, const LoraProduct (&products)[N],
                         const float* x, int64_t ldx) {
  if (!lora_rows_) return;
  ByRows(b.num_tokens, [&](int64_t r0, int64_t r1) {
    // Runs of consecutive tokens with one adapter (a prompt chunk, neighbouring decodes) go to
    // the kernel together: it reads each weight once for several rows.
    for (int64_t t = r0, end; t < r1; t = end) {
      const int32_t a = b.seq_adapter[b.token_seq[t]];
      end = t + 1;
      while (end < r1 && b.seq_adapter[b.token_seq[end]] == a) ++end;
      if (a < 0) continue;
      const LoraAdapter& adapter = *adapters_[a];
      for (const LoraProduct& p : products) {
        const LoraMatrix& m = adapter.layers[layer][p.module];
        if (m.empty()) continue;
        kernels::LoraAddRows(x + t * ldx, ldx, end - t, m.a.data(), m.bt.data(), adapter.rank,
                             m.n_in, m.n_out, p.y + t * p.ldy, p.ldy);
      }
    }
  });
}

// Runs fn(begin, end) over row ranges covering [0, rows): on the pool when there are enough rows
// to pay for the hand-off, else on this thread. Row-wise ops give the same bits either way.
template <typename Fn>
void LlamaModel::ByRows(int64_t rows, Fn&& fn) {
  constexpr int64_t kMinParallelRows = 16;
  if (pool_ != nullptr && rows >= kMinParallelRows) {
    pool_->ParallelFor(rows, [&](int64_t begin, int64_t end, int) { fn(begin, end); });
  } else {
    fn(0, rows);
  }
}

absl::Status LlamaModel::Forward(const ForwardBatch& b, KvCache* cache, float* logits) {
  const ModelConfig& c = weights_->rank_config;  // vocabulary and hidden size are the model's
  const LlamaWeights& w = *weights_;
  const int64_t n = b.num_tokens;
  if (n <= 0 || n > max_tokens_)
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", n, " tokens (max ", max_tokens_, ")"));
  for (int64_t t = 0; t < n; ++t) {
    if (b.token_ids[t] < 0 || b.token_ids[t] >= c.vocab_size)
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", b.token_ids[t], " out of vocabulary"));
    if (b.positions[t] < 0 || b.positions[t] >= c.max_position_embeddings)
      return absl::InvalidArgumentError(
          absl::StrCat("position ", b.positions[t], " beyond context"));
  }
  lora_rows_ = false;  // whether any row of this step runs an adapter (AddLora)
  for (int64_t s = 0; b.seq_adapter != nullptr && !adapters_.empty() && s < b.num_seqs; ++s) {
    const int32_t a = b.seq_adapter[s];
    if (a >= static_cast<int64_t>(adapters_.size()) || (a >= 0 && adapters_[a] == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat("row ", s, " runs empty LoRA slot ", a));
    }
    lora_rows_ = lora_rows_ || a >= 0;
  }
  const int64_t hs = c.hidden_size, hd = c.head_dim;
  const int64_t q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  const int64_t qkv_ld = q_dim + 2 * kv_dim, inter = c.intermediate_size;

  // Embedding lookup. With the vocabulary split, each rank writes the rows of its own tokens
  // and zeros, and the sum over ranks is every row exactly (one term is not zero).
  const bool vocab_split = w.vocab_end - w.vocab_begin < c.vocab_size;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = b.token_ids[t];
    if (vocab_split && (id < w.vocab_begin || id >= w.vocab_end)) {
      std::memset(x_ + t * hs, 0, hs * sizeof(float));
    } else {
      RETURN_IF_ERROR(w.LookupEmbedding(id, x_ + t * hs));
    }
  }
  if (vocab_split) RETURN_IF_ERROR(comm_->AllReduceSum(x_, n * hs));
  // The step's rotary angles, a row per token, for every layer.
  ByRows(n, [&](int64_t r0, int64_t r1) {
    RopeCosSinRows(inv_freq_, b.positions + r0, r1 - r0, rope_rows_ + r0 * hd);
  });
  kernels::AttentionBatch ab;
  ab.num_tokens = n;
  ab.num_heads = c.num_heads;
  ab.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ab.q = qkv_;
  ab.q_stride = qkv_ld;
  ab.out = attn_;
  ab.out_stride = q_dim;
  ab.token_seq = b.token_seq;
  ab.token_pos = b.positions;
  ab.block_tables = b.block_tables;
  ab.max_blocks_per_seq = b.block_table_stride;

  // h_ = RmsNorm(x_), after x_ += tmp_ (the last product's residual) when `residual`, and qx_ =
  // int8(h_) when `quantize`: one pass over the rows.
  auto norm = [&](const std::vector<float>& weight, bool residual, bool quantize) {
    if (quantize) kernels::ResizeActivations(n, hs, &qx_);
    ByRows(n, [&](int64_t r0, int64_t r1) {
      if (residual) {
        kernels::AddInPlace(x_ + r0 * hs, tmp_ + r0 * hs, (r1 - r0) * hs);
      }
      kernels::RmsNorm(x_ + r0 * hs, weight.data(), r1 - r0, hs, c.rms_norm_eps, h_ + r0 * hs);
      if (quantize) kernels::QuantizeActivationRows(h_, r0, r1, hs, &qx_);
    });
  };

  for (int64_t li = 0; li < c.num_layers; ++li) {
    const LlamaLayerWeights& l = w.layers[li];
    // The previous layer's down projection joins the residual stream here.
    const bool qkv_quantized = IsQuantized(l.wq) || IsQuantized(l.wk) || IsQuantized(l.wv);
    norm(l.attn_norm, li > 0, qkv_quantized);
    Products({{&l.wq, qkv_, qkv_ld},
              {&l.wk, qkv_ + q_dim, qkv_ld},
              {&l.wv, qkv_ + q_dim + kv_dim, qkv_ld}},
             h_, n, hs, qkv_quantized);
    AddLora(b, li,
            {{kLoraQ, qkv_, qkv_ld},
             {kLoraK, qkv_ + q_dim, qkv_ld},
             {kLoraV, qkv_ + q_dim + kv_dim, qkv_ld}},
            h_, hs);
    const kernels::PagedKvLayer kv = cache->layer(li);
    ByRows(n, [&](int64_t r0, int64_t r1) {
      float* q = qkv_ + r0 * qkv_ld;
      const int32_t* rows = token_index_.data() + r0;
      kernels::ApplyRope(q, r1 - r0, qkv_ld, c.num_heads, hd, rows, rope_rows_, w.rope_neox);
      kernels::ApplyRope(q + q_dim, r1 - r0, qkv_ld, c.num_kv_heads, hd, rows, rope_rows_,
                         w.rope_neox);
      kernels::WriteKv(kv, q + q_dim, q + q_dim + kv_dim, qkv_ld, r1 - r0, b.slots + r0);
    });
    kernels::PagedAttention(kv, ab, &attn_ws_, pool_);
    Products({{&l.wo, tmp_, hs}}, attn_, n, q_dim, false);
    AddLora(b, li, {{kLoraO, tmp_, hs}}, attn_, q_dim);
    if (comm_ != nullptr) RETURN_IF_ERROR(comm_->AllReduceSum(tmp_, n * hs));
    const bool ffn_quantized = IsQuantized(l.w_gate) || IsQuantized(l.w_up);
    norm(l.ffn_norm, true, ffn_quantized);
    Products({{&l.w_gate, gate_up_, 2 * inter}, {&l.w_up, gate_up_ + inter, 2 * inter}}, h_, n, hs,
             ffn_quantized);
    AddLora(b, li, {{kLoraGate, gate_up_, 2 * inter}, {kLoraUp, gate_up_ + inter, 2 * inter}}, h_,
            hs);
    const bool down_quantized = IsQuantized(l.w_down);
    if (down_quantized) kernels::ResizeActivations(n, inter, &qx_);
    ByRows(n, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {  // in place: the activation replaces the gate
        kernels::SiluMul(gate_up_ + r * 2 * inter, 1, inter, gate_up_ + r * 2 * inter);
      }
      if (down_quantized) kernels::QuantizeActivationRows(gate_up_, r0, r1, 2 * inter, &qx_);
    });
    Products({{&l.w_down, tmp_, hs}}, gate_up_, n, 2 * inter, down_quantized);
    AddLora(b, li, {{kLoraDown, tmp_, hs}}, gate_up_, 2 * inter);
    if (comm_ != nullptr) RETURN_IF_ERROR(comm_->AllReduceSum(tmp_, n * hs));
  }

  // Final residual, norm and output projection for the requested rows only.
  for (int64_t i = 0; i < b.num_logits; ++i) {
    const int32_t t = b.logit_indices[i];
    if (t < 0 || t >= n) return absl::InvalidArgumentError("logit index out of the batch");
    std::memcpy(h_ + i * hs, x_ + t * hs, hs * sizeof(float));
    if (c.num_layers > 0) kernels::AddInPlace(h_ + i * hs, tmp_ + t * hs, hs);
  }
  kernels::RmsNorm(h_, w.output_norm.data(), b.num_logits, hs, c.rms_norm_eps, h_);
  if (!vocab_split) {
    Products({{&w.lm_head, logits, c.vocab_size}}, h_, b.num_logits, hs, false);
    return absl::OkStatus();
  }
  // This rank's vocabulary columns, gathered on rank 0 as [rank][row][column] and laid out there
  // as [row][vocabulary]. The buffers grow to the largest step seen, then stay.
  const int64_t part = w.vocab_end - w.vocab_begin, rows = b.num_logits;
  const int ranks = comm_->world_size();
  if (static_cast<int64_t>(logits_part_.size()) < rows * part) logits_part_.resize(rows * part);
  Products({{&w.lm_head, logits_part_.data(), part}}, h_, rows, hs, false);
  const bool root = comm_->rank() == 0;
  if (root && static_cast<int64_t>(logits_all_.size()) < ranks * rows * part) {
    logits_all_.resize(ranks * rows * part);
  }
  RETURN_IF_ERROR(
      comm_->Gather(logits_part_.data(), rows * part, root ? logits_all_.data() : nullptr, 0));
  if (!root) return absl::OkStatus();
  for (int r = 0; r < ranks; ++r) {
    for (int64_t i = 0; i < rows; ++i) {
      std::memcpy(logits + i * c.vocab_size + r * part, logits_all_.data() + (r * rows + i) * part,
                  part * sizeof(float));
    }
  }
  return absl::OkStatus();
}

}  // namespace pagellm
