// One block per row. Pass 1: the raw maximum (lowest id), a NaN/+inf flag, and the argmax over
// unsuppressed ids (a suppressed id is found by a scan of the row's short list in shared
// memory). With logprobs, pass 2 sums exp(x - max) and counts logits above the chosen one, and
// each of N more passes finds the best entry strictly after the previous one in (logit desc, id
// asc) order.
#include <cfloat>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/greedy_sample.h"

namespace pagellm::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxSuppress = 256;  // longer lists take the slow (global memory) scan

struct Best {
  float v;
  int32_t id;
};

// a precedes b: larger value, then lower id; id -1 is "none".
__device__ __forceinline__ bool Before(Best a, Best b) {
  if (a.id < 0) return false;
  if (b.id < 0) return true;
  return a.v > b.v || (a.v == b.v && a.id < b.id);
}

__device__ __forceinline__ Best WarpBest(Best b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Best other{__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.id, o)};
    if (Before(other, b)) b = other;
  }
  return b;
}

// The block's best, returned to every thread. `scratch` holds 32 entries + 1.
__device__ Best BlockBest(Best b, Best* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  b = WarpBest(b);
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  if (warp == 0) {
    Best w = lane < kThreads / 32 ? scratch[lane] : Best{-FLT_MAX, -1};
    w = WarpBest(w);
    if (lane == 0) scratch[32] = w;
  }
  __syncthreads();
  const Best r = scratch[32];
  __syncthreads();  // scratch is reused by the next call
  return r;
}

__global__ void __launch_bounds__(kThreads)
    GreedySampleKernel(const float* logits, int64_t vocab, const GreedyRow* rows,
                       const int32_t* suppress_ids, GreedyResult* out) {
  __shared__ Best scratch[33];
  __shared__ float fscratch[33];
  __shared__ int32_t suppressed[kMaxSuppress];
  __shared__ int flag;
  const GreedyRow row = rows[blockIdx.x];
  const float* x = logits + static_cast<int64_t>(row.logits_row) * vocab;
  const int32_t* sup = suppress_ids + row.suppress_begin;
  const bool sup_in_smem = row.suppress_count <= kMaxSuppress;
  for (int i = threadIdx.x; i < row.suppress_count && sup_in_smem; i += kThreads) {
    suppressed[i] = sup[i];
  }
  if (threadIdx.x == 0) flag = 0;
  __syncthreads();
  const int32_t* list = sup_in_smem ? suppressed : sup;

  Best raw{-FLT_MAX, -1}, masked{-FLT_MAX, -1};
  bool bad = false;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = x[i];
    if (isnan(v) || v == INFINITY) bad = true;
    const Best c{v, static_cast<int32_t>(i)};
    if (Before(c, raw)) raw = c;
    bool s = false;
    for (int j = 0; j < row.suppress_count; ++j) s |= list[j] == i;
    if (!s && v > -INFINITY && Before(c, masked)) masked = c;
  }
  if (bad) flag = 1;  // benign race: every writer writes 1
  raw = BlockBest(raw, scratch);
  masked = BlockBest(masked, scratch);
  GreedyResult* r = out + blockIdx.x;
  if (flag != 0 || masked.id < 0) {
    if (threadIdx.x == 0) {
      r->status = flag != 0 ? GreedyResult::kNanOrInf : GreedyResult::kNoFiniteLogit;
      r->token = -1;
      r->num_top = 0;
    }
    return;
  }
  if (threadIdx.x == 0) {
    r->status = GreedyResult::kOk;
    r->token = masked.id;
    r->num_top = 0;
  }
  if (row.num_logprobs < 0) return;

  // log Z = max + log sum exp(x - max), and the chosen token's rank.
  const float chosen = x[masked.id];
  float sum = 0.0f, greater = 0.0f;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    sum += __expf(x[i] - raw.v);
    greater += x[i] > chosen ? 1.0f : 0.0f;
  }
  sum = BlockSum(sum, fscratch);
  greater = BlockSum(greater, fscratch);
  const float log_z = raw.v + logf(sum);
  if (threadIdx.x == 0) {
    r->logprob = chosen - log_z;
    r->rank = static_cast<int32_t>(greater) + 1;
  }
  Best prev{FLT_MAX, -1};
  const int n = min(row.num_logprobs, kMaxTopLogprobs);
  for (int k = 0; k < n; ++k) {
    Best b{-FLT_MAX, -1};
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const Best c{x[i], static_cast<int32_t>(i)};
      const bool after = prev.id < 0 || c.v < prev.v || (c.v == prev.v && c.id > prev.id);
      if (after && Before(c, b)) b = c;
    }
    b = BlockBest(b, scratch);
    if (b.id < 0) break;
    if (threadIdx.x == 0) {
      r->top_ids[k] = b.id;
      r->top_logprobs[k] = b.v - log_z;
      r->num_top = k + 1;
    }
    prev = b;
  }
}

}  // namespace

cudaError_t LaunchGreedySample(const float* logits, int64_t vocab, const GreedyRow* rows, int64_t n,
                               const int32_t* suppress_ids, GreedyResult* out,
                               cudaStream_t stream) {
  if (n < 0 || n > (1ll << 31) - 1 || vocab <= 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  GreedySampleKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, vocab, rows,
                                                                        suppress_ids, out);
  return cudaGetLastError();
}

}  // namespace pagellm::kernels::cuda
