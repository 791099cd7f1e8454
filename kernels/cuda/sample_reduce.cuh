// Device helpers shared by the sampling kernels (greedy_sample.cu, sample.cu): the (logit desc,
// id asc) order every sampler ranks by, its warp and block reductions, and the raw-distribution
// logprobs of a chosen token. Include only from .cu files; every function here that a block
// calls must be called by all of its threads.
#ifndef PAGELLM_KERNELS_CUDA_SAMPLE_REDUCE_CUH_
#define PAGELLM_KERNELS_CUDA_SAMPLE_REDUCE_CUH_

#include <cfloat>
#include <cstdint>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/greedy_sample.h"

namespace pagellm::kernels::cuda::sampling {

// An entry of a logits row; id -1 is "none".
struct Best {
  float v;
  int32_t id;
};

// a precedes b: larger value, then lower id; "none" comes last.
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

// The block's first entry in Before order, returned to every thread. `scratch` holds 33.
// REQUIRES: blockDim.x a multiple of 32.
__device__ __forceinline__ Best BlockBest(Best b, Best* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  b = WarpBest(b);
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  if (warp == 0) {
    Best w = lane < warps ? scratch[lane] : Best{-FLT_MAX, -1};
    w = WarpBest(w);
    if (lane == 0) scratch[32] = w;
  }
  __syncthreads();
  const Best r = scratch[32];
  __syncthreads();  // scratch is reused by the next call
  return r;
}

// Fills r->logprob, r->rank and the top-N fields for token `chosen` of the raw row x (raw_max:
// its maximum): log_softmax of x, rank = 1 + the count of strictly larger logits, the N most
// likely most likely first with ties to the lower id. N = min(num_logprobs, kMaxTopLogprobs);
// num_logprobs < 0 leaves them alone. Thread 0 writes.
__device__ __forceinline__ void RawLogprobs(const float* x, int64_t vocab, float raw_max,
                                            int32_t chosen, int num_logprobs, GreedyResult* r,
                                            Best* scratch, float* fscratch) {
  if (num_logprobs < 0) return;
  const float chosen_v = x[chosen];
  float sum = 0.0f, greater = 0.0f;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    sum += __expf(x[i] - raw_max);
    greater += x[i] > chosen_v ? 1.0f : 0.0f;
  }
  sum = BlockSum(sum, fscratch);
  greater = BlockSum(greater, fscratch);
  const float log_z = raw_max + logf(sum);
  if (threadIdx.x == 0) {
    r->logprob = chosen_v - log_z;
    r->rank = static_cast<int32_t>(greater) + 1;
  }
  Best prev{FLT_MAX, -1};
  const int n = min(num_logprobs, kMaxTopLogprobs);
  for (int k = 0; k < n; ++k) {
    Best b{-FLT_MAX, -1};
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
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

}  // namespace pagellm::kernels::cuda::sampling

#endif  // PAGELLM_KERNELS_CUDA_SAMPLE_REDUCE_CUH_
