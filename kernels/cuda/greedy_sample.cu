// One block per row. Pass 1: the raw maximum (lowest id), a NaN/+inf flag, and the argmax over
// unsuppressed ids (a suppressed id is found by a scan of the row's short list in shared
// memory). With logprobs, pass 2 sums exp(x - max) and counts logits above the chosen one, and
// each of N more passes finds the best entry strictly after the previous one in (logit desc, id
// asc) order.
#include <cfloat>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/greedy_sample.h"
#include "kernels/cuda/sample_reduce.cuh"

namespace pagellm::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxSuppress = 256;  // longer lists take the slow (global memory) scan

using sampling::Before;
using sampling::Best;
using sampling::BlockBest;

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

  sampling::RawLogprobs(x, vocab, raw.v, masked.id, row.num_logprobs, r, scratch, fscratch);
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
