// Forward pass. Per layer: RMSNorm -> Q/K/V projections (one activation quantization shared by
// the three) -> RoPE -> K/V written to their slots -> paged attention -> output projection and
// residual -> RMSNorm -> gate/up projections -> SiLU * up -> down projection and residual.
// Every kernel is row-local or reads the cache by position, so a token's result does not depend
// on what else is in the batch.
#include "worker/backend/cpu/llama_model.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/f32_matmul.h"
#include "kernels/cpu/ops.h"
#include "worker/model/rope_table.h"

namespace pagellm {

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(
    std::unique_ptr<LlamaWeights> weights, int64_t max_batch_tokens, kernels::ThreadPool* pool) {
  if (max_batch_tokens <= 0 || max_batch_tokens > (1 << 20))
    return absl::InvalidArgumentError(absl::StrCat("bad max batch tokens ", max_batch_tokens));
  RETURN_IF_ERROR(weights->config.Validate());
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->weights_ = std::move(weights);
  m->pool_ = pool;
  m->max_tokens_ = max_batch_tokens;
  const ModelConfig& c = m->weights_->config;
  const int64_t t = max_batch_tokens;
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  m->x_.resize(t * c.hidden_size);
  m->h_.resize(t * c.hidden_size);
  m->tmp_.resize(t * c.hidden_size);
  m->qkv_.resize(t * (q_dim + 2 * kv_dim));
  m->attn_.resize(t * q_dim);
  m->gate_up_.resize(t * 2 * c.intermediate_size);
  m->act_.resize(t * c.intermediate_size);
  m->rope_ = RopeCosSinTable(c, m->weights_->rope_freq_factors);
  return m;
}

void LlamaModel::Linear(const Matrix& w, const float* x, int64_t rows, int64_t ldx, float* y,
                        int64_t ldy, bool x_already_quantized) {
  if (w.type == GgmlType::kF32) {
    kernels::F32Matmul(x, rows, w.n_in, ldx, w.f32.data(), w.n_out, y, ldy);
  } else {
    if (!x_already_quantized) kernels::QuantizeActivations(x, rows, w.n_in, ldx, &qx_, pool_);
    kernels::QuantMatmul(w.packed, qx_, y, ldy, pool_);
  }
  if (!w.bias.empty()) {
    for (int64_t r = 0; r < rows; ++r) kernels::AddInPlace(y + r * ldy, w.bias.data(), w.n_out);
  }
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
  const ModelConfig& c = weights_->config;
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
  const int64_t hs = c.hidden_size, hd = c.head_dim;
  const int64_t q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  const int64_t qkv_ld = q_dim + 2 * kv_dim, inter = c.intermediate_size;

  // Embedding lookup.
  for (int64_t t = 0; t < n; ++t) {
    const Embedding& e = w.token_embedding;
    RETURN_IF_ERROR(kernels::DequantizeRow(e.type, e.data + b.token_ids[t] * e.row_bytes,
                                           x_.data() + t * hs, hs));
  }
  kernels::AttentionBatch ab;
  ab.num_tokens = n;
  ab.num_heads = c.num_heads;
  ab.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ab.q = qkv_.data();
  ab.q_stride = qkv_ld;
  ab.out = attn_.data();
  ab.out_stride = q_dim;
  ab.token_seq = b.token_seq;
  ab.token_pos = b.positions;
  ab.block_tables = b.block_tables;
  ab.max_blocks_per_seq = b.block_table_stride;

  for (int64_t li = 0; li < c.num_layers; ++li) {
    const LlamaLayerWeights& l = w.layers[li];
    ByRows(n, [&](int64_t r0, int64_t r1) {
      kernels::RmsNorm(x_.data() + r0 * hs, l.attn_norm.data(), r1 - r0, hs, c.rms_norm_eps,
                       h_.data() + r0 * hs);
    });
    Linear(l.wq, h_.data(), n, hs, qkv_.data(), qkv_ld, false);
    Linear(l.wk, h_.data(), n, hs, qkv_.data() + q_dim, qkv_ld, l.wq.type == l.wk.type);
    Linear(l.wv, h_.data(), n, hs, qkv_.data() + q_dim + kv_dim, qkv_ld, l.wk.type == l.wv.type);
    const kernels::PagedKvLayer kv = cache->layer(li);
    ByRows(n, [&](int64_t r0, int64_t r1) {
      float* q = qkv_.data() + r0 * qkv_ld;
      kernels::ApplyRope(q, r1 - r0, qkv_ld, c.num_heads, hd, b.positions + r0, rope_.data(),
                         w.rope_neox);
      kernels::ApplyRope(q + q_dim, r1 - r0, qkv_ld, c.num_kv_heads, hd, b.positions + r0,
                         rope_.data(), w.rope_neox);
      kernels::WriteKv(kv, q + q_dim, q + q_dim + kv_dim, qkv_ld, r1 - r0, b.slots + r0);
    });
    kernels::PagedAttention(kv, ab, &attn_ws_, pool_);
    Linear(l.wo, attn_.data(), n, q_dim, tmp_.data(), hs, false);
    ByRows(n, [&](int64_t r0, int64_t r1) {
      kernels::AddInPlace(x_.data() + r0 * hs, tmp_.data() + r0 * hs, (r1 - r0) * hs);
      kernels::RmsNorm(x_.data() + r0 * hs, l.ffn_norm.data(), r1 - r0, hs, c.rms_norm_eps,
                       h_.data() + r0 * hs);
    });
    Linear(l.w_gate, h_.data(), n, hs, gate_up_.data(), 2 * inter, false);
    Linear(l.w_up, h_.data(), n, hs, gate_up_.data() + inter, 2 * inter,
           l.w_gate.type == l.w_up.type);
    ByRows(n, [&](int64_t r0, int64_t r1) {
      kernels::SiluMul(gate_up_.data() + r0 * 2 * inter, r1 - r0, inter, act_.data() + r0 * inter);
    });
    Linear(l.w_down, act_.data(), n, inter, tmp_.data(), hs, false);
    ByRows(n, [&](int64_t r0, int64_t r1) {
      kernels::AddInPlace(x_.data() + r0 * hs, tmp_.data() + r0 * hs, (r1 - r0) * hs);
    });
  }

  // Final norm and output projection for the requested rows only.
  for (int64_t i = 0; i < b.num_logits; ++i) {
    const int32_t t = b.logit_indices[i];
    if (t < 0 || t >= n) return absl::InvalidArgumentError("logit index out of the batch");
    std::memcpy(h_.data() + i * hs, x_.data() + t * hs, hs * sizeof(float));
  }
  kernels::RmsNorm(h_.data(), w.output_norm.data(), b.num_logits, hs, c.rms_norm_eps, h_.data());
  Linear(w.lm_head, h_.data(), b.num_logits, hs, logits, c.vocab_size, false);
  return absl::OkStatus();
}

}  // namespace pagellm
