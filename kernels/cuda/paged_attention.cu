// The paged attention kernel. Per block: token t, KV head g, query heads h0 .. h0 + nh - 1
// (nh <= MAXH), split s covering positions [s * split_len, min(ctx, (s + 1) * split_len)).
//
// Threads: 4 warps. A warp reads G = D / 8 lanes per key (16 bytes each), so 32 / G keys at a
// time; the block reads 4 * 32 / G keys per step. Per chunk of kAttentionChunk positions:
//   1. scores s[h][i] = (q_h * scale * log2 e) . k_i, reduced over the G lanes, into shared
//      memory (-inf past the context);
//   2. per head (one warp each), the chunk's max m', the running max m = max(m, m'), scores
//      replaced by p = 2^(s - m), running sum l = l * 2^(m_old - m) + sum p, and the factor
//      alpha = 2^(m_old - m) by which earlier accumulators shrink;
//   3. acc_h *= alpha_h; acc_h += p[h][i] * v_i for the keys this lane group owns.
// At the end the lane groups and warps are summed in shared memory. One split: out = acc / l.
// Several: acc, m, l go to the workspace and MergeKernel combines them. Running maxima start at
// a finite -1e30 so that 2^(m_old - m) is never NaN; an empty split reports l = 0, which merges
// to nothing.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/paged_attention.h"

namespace pagellm::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNoMax = -1e30f;

template <typename T, int D, int MAXH>
__global__ void __launch_bounds__(kThreads) PagedAttentionKernel(PagedAttentionParams p) {
  constexpr int G = D / 8;  // lanes per key
  constexpr int KEYS_PER_WARP = 32 / G;
  constexpr int KEYS_PER_STEP = kWarps * KEYS_PER_WARP;
  constexpr int C = kAttentionChunk;
  static_assert(C % KEYS_PER_STEP == 0, "chunk must be whole steps");

  __shared__ float scores[MAXH][C];
  __shared__ float run_max[MAXH], run_sum[MAXH], alpha[MAXH];
  __shared__ float reduce[kWarps][MAXH][D];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int key_in_warp = lane / G, gl = lane % G;
  const int64_t li = blockIdx.x;                              // the launch's token: workspace rows
  const int64_t t = p.tokens != nullptr ? p.tokens[li] : li;  // the step's token
  const int64_t hkv = p.kv.num_kv_heads;
  const int64_t ratio = p.num_heads / hkv;
  const int64_t chunks_per_kv = (ratio + MAXH - 1) / MAXH;
  const int64_t g = blockIdx.y / chunks_per_kv;
  const int64_t h0 = g * ratio + (blockIdx.y % chunks_per_kv) * MAXH;
  const int nh = static_cast<int>(min(static_cast<int64_t>(MAXH), g * ratio + ratio - h0));
  const int split = blockIdx.z;

  const int64_t ctx = static_cast<int64_t>(p.positions[t]) + 1;
  const int64_t begin = static_cast<int64_t>(split) * p.plan.split_len;
  const int64_t end = min(ctx, begin + p.plan.split_len);
  const bool merged = p.plan.num_splits > 1;
  const int64_t ws_row = (static_cast<int64_t>(split) * p.num_tokens + li) * p.num_heads;

  if (begin >= end) {     // an empty split (a shorter context than the step's longest)
    if (!merged) return;  // unreachable: split 0 always holds position 0
    for (int h = threadIdx.x; h < nh; h += kThreads) {
      float* ml =
          p.workspace + static_cast<int64_t>(p.plan.num_splits) * p.num_tokens * p.num_heads * D;
      ml[2 * (ws_row + h0 + h)] = kNoMax;
      ml[2 * (ws_row + h0 + h) + 1] = 0.0f;
    }
    for (int i = threadIdx.x; i < nh * D; i += kThreads) {
      p.workspace[(ws_row + h0 + i / D) * D + i % D] = 0.0f;
    }
    return;
  }

  const T* q = static_cast<const T*>(p.q) + t * p.q_stride;
  float qf[MAXH][8];
#pragma unroll
  for (int h = 0; h < MAXH; ++h) {
    if (h < nh) {
      Load8(q + (h0 + h) * D + gl * 8, qf[h]);
#pragma unroll
      for (int k = 0; k < 8; ++k) qf[h][k] *= p.scale * kLog2e;
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) qf[h][k] = 0.0f;  // a head past the group: computed, unused
    }
  }
  float acc[MAXH][8];
#pragma unroll
  for (int h = 0; h < MAXH; ++h) {
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[h][k] = 0.0f;
  }
  if (threadIdx.x < MAXH) {
    run_max[threadIdx.x] = kNoMax;
    run_sum[threadIdx.x] = 0.0f;
  }
  __syncthreads();

  const int32_t* table =
      p.block_tables + static_cast<int64_t>(p.token_seq[t]) * p.block_table_stride;
  const int64_t bs = p.kv.block_size;
  const int64_t stride = p.kv.shape().stride();
  const T* kbase = static_cast<const T*>(p.kv.k) + (g * bs) * D + gl * 8;
  const T* vbase = static_cast<const T*>(p.kv.v) + (g * bs) * D + gl * 8;

  for (int64_t c0 = begin; c0 < end; c0 += C) {
    // 1. Scores.
    for (int i = warp * KEYS_PER_WARP + key_in_warp; i < C; i += KEYS_PER_STEP) {
      const int64_t pos = c0 + i;
      float s[MAXH];
      if (pos < end) {
        const int64_t off = static_cast<int64_t>(table[pos / bs]) * stride + (pos % bs) * D;
        float kf[8];
        Load8(kbase + off, kf);
#pragma unroll
        for (int h = 0; h < MAXH; ++h) {
          s[h] = 0.0f;
#pragma unroll
          for (int k = 0; k < 8; ++k) s[h] = fmaf(qf[h][k], kf[k], s[h]);
        }
      } else {
#pragma unroll
        for (int h = 0; h < MAXH; ++h) s[h] = 0.0f;
      }
#pragma unroll
      for (int h = 0; h < MAXH; ++h) {
#pragma unroll
        for (int o = G / 2; o > 0; o >>= 1) s[h] += __shfl_xor_sync(0xffffffffu, s[h], o);
      }
      if (gl == 0) {
#pragma unroll
        for (int h = 0; h < MAXH; ++h) {
          if (h < nh) scores[h][i] = pos < end ? s[h] : -INFINITY;
        }
      }
    }
    __syncthreads();
    // 2. Online softmax, one warp per head.
    for (int h = warp; h < nh; h += kWarps) {
      float mx = -INFINITY;
      for (int i = lane; i < C; i += 32) mx = fmaxf(mx, scores[h][i]);
      mx = WarpMax(mx);
      const float m_old = run_max[h];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
      for (int i = lane; i < C; i += 32) {
        const float e = exp2f(scores[h][i] - m_new);
        scores[h][i] = e;
        sum += e;
      }
      sum = WarpSum(sum);
      if (lane == 0) {
        const float a = exp2f(m_old - m_new);
        alpha[h] = a;
        run_sum[h] = run_sum[h] * a + sum;
        run_max[h] = m_new;
      }
    }
    __syncthreads();
    // 3. Accumulate values.
#pragma unroll
    for (int h = 0; h < MAXH; ++h) {
      if (h < nh) {
        const float a = alpha[h];
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[h][k] *= a;
      }
    }
    for (int i = warp * KEYS_PER_WARP + key_in_warp; i < C; i += KEYS_PER_STEP) {
      const int64_t pos = c0 + i;
      if (pos >= end) break;
      const int64_t off = static_cast<int64_t>(table[pos / bs]) * stride + (pos % bs) * D;
      float vf[8];
      Load8(vbase + off, vf);
#pragma unroll
      for (int h = 0; h < MAXH; ++h) {
        if (h < nh) {
          const float pr = scores[h][i];
#pragma unroll
          for (int k = 0; k < 8; ++k) acc[h][k] = fmaf(pr, vf[k], acc[h][k]);
        }
      }
    }
    __syncthreads();  // scores and alpha are rewritten by the next chunk
  }

  // Sum the lane groups of each warp, then the warps.
#pragma unroll
  for (int h = 0; h < MAXH; ++h) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
#pragma unroll
      for (int o = G; o < 32; o <<= 1) acc[h][k] += __shfl_xor_sync(0xffffffffu, acc[h][k], o);
    }
  }
  if (key_in_warp == 0) {
#pragma unroll
    for (int h = 0; h < MAXH; ++h) {
      if (h < nh) {
#pragma unroll
        for (int k = 0; k < 8; ++k) reduce[warp][h][gl * 8 + k] = acc[h][k];
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nh * D; i += kThreads) {
    const int h = i / D, d = i % D;
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += reduce[w][h][d];
    if (!merged) {
      T* out = static_cast<T*>(p.out) + t * p.out_stride + (h0 + h) * D;
      out[d] = FromFloat<T>(o / run_sum[h]);
    } else {
      p.workspace[(ws_row + h0 + h) * D + d] = o;
    }
  }
  if (merged) {
    float* ml =
        p.workspace + static_cast<int64_t>(p.plan.num_splits) * p.num_tokens * p.num_heads * D;
    for (int h = threadIdx.x; h < nh; h += kThreads) {
      ml[2 * (ws_row + h0 + h)] = run_max[h];
      ml[2 * (ws_row + h0 + h) + 1] = run_sum[h];
    }
  }
}

// One block per (token, head), one thread per output element.
template <typename T, int D>
__global__ void __launch_bounds__(D) MergeKernel(PagedAttentionParams p) {
  const int64_t li = blockIdx.x, h = blockIdx.y;
  const int64_t t = p.tokens != nullptr ? p.tokens[li] : li;
  const int splits = p.plan.num_splits;
  const int64_t per_split = p.num_tokens * p.num_heads;
  const float* ml = p.workspace + static_cast<int64_t>(splits) * per_split * D;
  float m = kNoMax;
  for (int s = 0; s < splits; ++s) m = fmaxf(m, ml[2 * (s * per_split + li * p.num_heads + h)]);
  float l = 0.0f, o = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const int64_t row = s * per_split + li * p.num_heads + h;
    const float w = exp2f(ml[2 * row] - m);
    l += w * ml[2 * row + 1];
    o += w * p.workspace[row * D + threadIdx.x];
  }
  T* out = static_cast<T*>(p.out) + t * p.out_stride + h * D;
  out[threadIdx.x] = FromFloat<T>(o / l);
}

template <typename T, int D, int MAXH>
cudaError_t Launch(const PagedAttentionParams& p, cudaStream_t stream) {
  const int64_t ratio = p.num_heads / p.kv.num_kv_heads;
  const int64_t chunks = (ratio + MAXH - 1) / MAXH;
  const dim3 grid(static_cast<unsigned>(p.num_tokens),
                  static_cast<unsigned>(p.kv.num_kv_heads * chunks),
                  static_cast<unsigned>(p.plan.num_splits));
  PagedAttentionKernel<T, D, MAXH><<<grid, kThreads, 0, stream>>>(p);
  if (p.plan.num_splits > 1) {
    MergeKernel<T, D>
        <<<dim3(static_cast<unsigned>(p.num_tokens), static_cast<unsigned>(p.num_heads)), D, 0,
           stream>>>(p);
  }
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t LaunchForRatio(const PagedAttentionParams& p, cudaStream_t stream) {
  const int64_t ratio = p.num_heads / p.kv.num_kv_heads;
  if (ratio == 1) return Launch<T, D, 1>(p, stream);
  if (ratio == 2) return Launch<T, D, 2>(p, stream);
  if (ratio <= 4) return Launch<T, D, 4>(p, stream);
  return Launch<T, D, 8>(p, stream);
}

template <typename T>
cudaError_t LaunchForType(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.kv.head_dim == 64) return LaunchForRatio<T, 64>(p, stream);
  if (p.kv.head_dim == 128) return LaunchForRatio<T, 128>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

PagedAttentionPlan PlanPagedAttention(int64_t num_tokens, int64_t num_heads, int64_t num_kv_heads,
                                      int64_t max_context, int num_sms, int64_t max_split_rows) {
  PagedAttentionPlan plan;
  const int64_t chunks = (max_context + kAttentionChunk - 1) / kAttentionChunk;
  if (num_tokens <= 0 || num_kv_heads <= 0 || chunks <= 1) {
    plan.split_len = static_cast<int32_t>(std::max<int64_t>(chunks, 1) * kAttentionChunk);
    return plan;
  }
  const int64_t ratio = num_heads / num_kv_heads;
  const int64_t blocks = num_tokens * num_kv_heads * ((ratio + 7) / 8);
  int64_t splits = (2 * static_cast<int64_t>(num_sms) + blocks - 1) / blocks;
  splits = std::min<int64_t>(
      {splits, chunks, kMaxAttentionSplits, std::max<int64_t>(1, max_split_rows / num_tokens)});
  splits = std::max<int64_t>(splits, 1);
  const int64_t chunks_per_split = (chunks + splits - 1) / splits;
  plan.split_len = static_cast<int32_t>(chunks_per_split * kAttentionChunk);
  plan.num_splits = static_cast<int32_t>((chunks + chunks_per_split - 1) / chunks_per_split);
  return plan;
}

cudaError_t LaunchPagedAttention(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.num_tokens < 0 || p.num_tokens > 65535 * 1024ll || p.num_heads <= 0 ||
      p.kv.num_kv_heads <= 0 || p.num_heads % p.kv.num_kv_heads != 0 || p.plan.num_splits < 1 ||
      p.plan.num_splits > kMaxAttentionSplits || p.plan.split_len <= 0 ||
      p.plan.split_len % kAttentionChunk != 0 ||
      (p.plan.num_splits > 1 && p.workspace == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (p.num_tokens == 0) return cudaSuccess;
  PAGELLM_DISPATCH_HALF(p.kv.dtype, T, return LaunchForType<T>(p, stream));
  return cudaSuccess;
}

}  // namespace pagellm::kernels::cuda
