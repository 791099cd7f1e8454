// One block per row.
//   1. A pass over the raw row (NaN/+inf, its maximum) and the sampled row (its maximum).
//   2. Greedy rows stop here. Otherwise every pass below recomputes, per id, its order key
//      (the logit as a uint32 that sorts ascending as (logit desc)) and its fixed-point
//      p = exp((x - max) / T); nothing is stored.
//   3. top-k and top-p are each a selection of one element of the (key, id) order: the first
//      whose inclusive prefix weight reaches a target (weight 1 for top-k, p for top-p). Four
//      rounds of 8-bit radix histograms (uint64 shared atomics: exact, so order-free) narrow
//      the key; a prefix scan in id order among the equal keys picks the id. A token survives
//      a truncation iff it is at or before that element.
//   4. The draw: the first survivor in id order whose inclusive prefix p exceeds u * total,
//      by a prefix scan (a warp per contiguous segment, coalesced).
#include <cfloat>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/sample.h"
#include "kernels/cuda/sample_reduce.cuh"

namespace pagellm::kernels::cuda {
namespace {

using sampling::Before;
using sampling::Best;
using sampling::BlockBest;
using u64 = unsigned long long;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr float kFixedOne = 1099511627776.0f;  // 2^40: p = 1 in fixed point

// Ascending in (logit desc); -0 ranks as +0 (the CPU sampler compares floats).
__device__ __forceinline__ uint32_t OrderKey(float x) {
  if (x == 0.0f) x = 0.0f;
  const uint32_t b = __float_as_uint(x);
  return (b & 0x80000000u) ? b : ~(b | 0x80000000u);
}

__device__ __forceinline__ u64 WarpSumU64(u64 v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ u64 WarpInclusiveScanU64(u64 v) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u64 up = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += up;
  }
  return v;
}

struct Shared {
  u64 hist[256];
  u64 warp_sums[kWarps];
  u64 sel_before;
  uint32_t sel_bin;
  int32_t found_warp;
  u64 found_before;
  int32_t found_id;
  int flag;
  Best best[33];
  float f[33];
};

// Sum of w(i) over the row, returned to every thread.
template <typename W>
__device__ u64 BlockSumU64(int64_t vocab, W w, Shared& s) {
  u64 sum = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) sum += w(i);
  sum = WarpSumU64(sum);
  if (threadIdx.x % 32 == 0) s.warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  u64 total = 0;
  for (int j = 0; j < kWarps; ++j) total += s.warp_sums[j];
  __syncthreads();
  return total;
}

// The first id, in id order, whose inclusive prefix sum of w exceeds r; -1 if the total is at
// most r. Returned to every thread.
template <typename W>
__device__ int32_t FindPrefix(int64_t vocab, u64 r, W w, Shared& s) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t seg = (vocab + kThreads - 1) / kThreads * 32;
  const int64_t begin = warp * seg, end = min(begin + seg, vocab);
  u64 sum = 0;
  for (int64_t i = begin + lane; i < end; i += 32) sum += w(i);
  sum = WarpSumU64(sum);
  if (lane == 0) s.warp_sums[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    u64 before = 0;
    s.found_warp = -1;
    s.found_id = -1;
    for (int j = 0; j < kWarps; ++j) {
      if (r < before + s.warp_sums[j]) {
        s.found_warp = j;
        break;
      }
      before += s.warp_sums[j];
    }
    s.found_before = before;
  }
  __syncthreads();
  if (warp == s.found_warp) {
    u64 running = s.found_before;
    for (int64_t base = begin; base < end; base += 32) {
      const int64_t i = base + lane;
      const u64 incl = WarpInclusiveScanU64(i < end ? w(i) : 0);
      const unsigned hit = __ballot_sync(0xffffffffu, running + incl > r);
      if (hit != 0) {
        if (lane == 0) s.found_id = static_cast<int32_t>(base + __ffs(hit) - 1);
        break;
      }
      running += __shfl_sync(0xffffffffu, incl, 31);
    }
  }
  __syncthreads();
  const int32_t id = s.found_id;
  __syncthreads();
  return id;
}

// A position in the (key asc, id asc) order; id -1: past the end (everything is at or before).
struct Cut {
  uint32_t key;
  int32_t id;
  __device__ bool Keeps(uint32_t k, int64_t i) const {
    return id < 0 || k < key || (k == key && i <= id);
  }
};

// Among the ids where in(i, key) holds, in (key, id) order, the first whose inclusive prefix
// weight w(i) reaches `target` (> 0); a Cut past the end if the total falls short.
template <typename In, typename W>
__device__ Cut Select(const float* x, int64_t vocab, In in, W w, u64 target, Shared& s) {
  uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) s.hist[b] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const uint32_t k = OrderKey(x[i]);
      if ((k & mask) != prefix || !in(k, i)) continue;
      const u64 wi = w(i);
      if (wi != 0) atomicAdd(&s.hist[(k >> shift) & 255u], wi);
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // the bin where the prefix weight reaches target
      const int lane = threadIdx.x;
      u64 local = 0;
      for (int b = 0; b < 8; ++b) local += s.hist[lane * 8 + b];
      const u64 incl = WarpInclusiveScanU64(local);
      const unsigned hit = __ballot_sync(0xffffffffu, incl >= target);
      const int owner = hit != 0 ? __ffs(hit) - 1 : -1;
      if (owner < 0) {
        if (lane == 0) s.sel_bin = 256;  // short of target
      } else if (lane == owner) {
        u64 before = incl - local;
        int b = lane * 8;
        while (b < lane * 8 + 7 && before + s.hist[b] < target) before += s.hist[b++];
        s.sel_bin = static_cast<uint32_t>(b);
        s.sel_before = before;
      }
    }
    __syncthreads();
    if (s.sel_bin == 256) {
      __syncthreads();
      return Cut{0, -1};
    }
    prefix |= s.sel_bin << shift;
    mask |= 255u << shift;
    target -= s.sel_before;
    __syncthreads();
  }
  const int32_t id = FindPrefix(
      vocab, target - 1,
      [&](int64_t i) -> u64 {
        const uint32_t k = OrderKey(x[i]);
        return k == prefix && in(k, i) ? w(i) : 0;
      },
      s);
  return Cut{prefix, id};
}

__global__ void __launch_bounds__(kThreads)
    PenaltyKernel(const float* logits, int64_t vocab, const PenaltyRow* rows,
                  const PenaltyEntry* history, const int32_t* suppress_ids, float* work) {
  const PenaltyRow row = rows[blockIdx.x];
  const float* x = logits + static_cast<int64_t>(row.logits_row) * vocab;
  float* y = work + static_cast<int64_t>(row.work_row) * vocab;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) y[i] = x[i];
  __syncthreads();
  const bool repetition = row.repetition != 1.0f;
  for (int j = threadIdx.x; j < row.history_count; j += kThreads) {
    const PenaltyEntry e = history[row.history_begin + j];
    float v = y[e.id];
    if (repetition) v = v > 0.0f ? __fdiv_rn(v, row.repetition) : __fmul_rn(v, row.repetition);
    v = __fsub_rn(v, __fmul_rn(row.frequency, static_cast<float>(e.output_count)));
    if (e.output_count > 0) v = __fsub_rn(v, row.presence);
    y[e.id] = v;
  }
  __syncthreads();
  for (int j = threadIdx.x; j < row.suppress_count; j += kThreads) {
    y[suppress_ids[row.suppress_begin + j]] = -INFINITY;
  }
}

__global__ void __launch_bounds__(kThreads)
    SampleKernel(const float* logits, const float* work, int64_t vocab, const SampleRow* rows,
                 GreedyResult* out) {
  __shared__ Shared s;
  const SampleRow row = rows[blockIdx.x];
  const float* raw = logits + static_cast<int64_t>(row.logits_row) * vocab;
  const float* x = row.work_row >= 0 ? work + static_cast<int64_t>(row.work_row) * vocab : raw;
  if (threadIdx.x == 0) s.flag = 0;
  __syncthreads();

  Best raw_best{-FLT_MAX, -1}, peak{-FLT_MAX, -1};
  bool bad = false;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float r = raw[i], v = x[i];
    if (isnan(r) || r == INFINITY) bad = true;
    if (Before(Best{r, static_cast<int32_t>(i)}, raw_best)) {
      raw_best = Best{r, static_cast<int32_t>(i)};
    }
    if (v > -INFINITY && Before(Best{v, static_cast<int32_t>(i)}, peak)) {
      peak = Best{v, static_cast<int32_t>(i)};
    }
  }
  if (bad) s.flag = 1;  // benign race: every writer writes 1
  raw_best = BlockBest(raw_best, s.best);
  peak = BlockBest(peak, s.best);
  GreedyResult* result = out + blockIdx.x;
  if (s.flag != 0 || peak.id < 0 || !isfinite(peak.v)) {
    if (threadIdx.x == 0) {
      result->status = s.flag != 0 ? GreedyResult::kNanOrInf : GreedyResult::kNoFiniteLogit;
      result->token = -1;
      result->num_top = 0;
    }
    return;
  }

  int32_t token = peak.id;
  if (row.temperature > 0.0f) {
    const float peak_v = peak.v, inv_t = 1.0f / row.temperature;
    auto prob = [=](int64_t i) { return expf((x[i] - peak_v) * inv_t); };
    auto fixed = [=](int64_t i) -> u64 { return __float2ull_rn(prob(i) * kFixedOne); };
    auto all = [](uint32_t, int64_t) { return true; };
    Cut top_k{0, -1};
    if (row.top_k > 0 && row.top_k < vocab) {
      top_k = Select(
          x, vocab, all, [](int64_t) -> u64 { return 1; }, static_cast<u64>(row.top_k), s);
    }
    auto in_k = [=](uint32_t k, int64_t i) { return top_k.Keeps(k, i); };
    Cut top_p{0, -1};
    if (row.top_p < 1.0f) {
      const u64 total = BlockSumU64(
          vocab, [&](int64_t i) -> u64 { return in_k(OrderKey(x[i]), i) ? fixed(i) : 0; }, s);
      const u64 target = max(
          u64{1}, static_cast<u64>(static_cast<double>(row.top_p) * static_cast<double>(total)));
      top_p = Select(x, vocab, in_k, fixed, target, s);
    }
    const float min_p = row.min_p;
    auto weight = [=](int64_t i) -> u64 {
      const uint32_t k = OrderKey(x[i]);
      if (!top_k.Keeps(k, i) || !top_p.Keeps(k, i)) return 0;
      const float p = prob(i);
      return min_p > 0.0f && !(p >= min_p) ? 0 : __float2ull_rn(p * kFixedOne);
    };
    const u64 total = BlockSumU64(vocab, weight, s);
    u64 r = static_cast<u64>(row.u * static_cast<double>(total));
    if (r >= total) r = total - 1;  // total >= 2^40: the peak survives with p = 1
    token = FindPrefix(vocab, r, weight, s);
    if (token < 0) token = peak.id;  // unreachable: r < total
  }
  if (threadIdx.x == 0) {
    result->status = GreedyResult::kOk;
    result->token = token;
    result->num_top = 0;
  }
  sampling::RawLogprobs(raw, vocab, raw_best.v, token, row.num_logprobs, result, s.best, s.f);
}

__device__ __forceinline__ double WarpSumF64(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A kept candidate: its order key, then id; sorts ascending.
struct KeyId {
  uint32_t key;
  int32_t id;
};
__device__ __forceinline__ bool Less(KeyId a, KeyId b) {
  return a.key < b.key || (a.key == b.key && a.id < b.id);
}

__global__ void __launch_bounds__(kThreads)
    BeamKernel(const float* logits, int64_t vocab, const BeamRow* rows, const int32_t* suppress_ids,
               int32_t* ids, double* logprobs) {
  extern __shared__ uint32_t banned[];  // one bit per id
  __shared__ Shared s;
  __shared__ KeyId kept[kMaxBeamCandidates];
  __shared__ double dsum[kWarps];
  __shared__ int32_t num_kept;
  const BeamRow row = rows[blockIdx.x];
  const float* x = logits + static_cast<int64_t>(row.logits_row) * vocab;
  const int64_t words = (vocab + 31) / 32;
  for (int64_t w = threadIdx.x; w < words; w += kThreads) banned[w] = 0;
  if (threadIdx.x == 0) num_kept = 0;
  __syncthreads();
  for (int j = threadIdx.x; j < row.suppress_count; j += kThreads) {
    const int32_t id = suppress_ids[row.suppress_begin + j];
    atomicOr(&banned[id / 32], 1u << (id % 32));
  }
  __syncthreads();

  // log Z of the raw row, in double (banned ids included, as the CPU's).
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) m = fmaxf(m, x[i]);
  m = WarpMax(m);
  if (threadIdx.x % 32 == 0) s.best[threadIdx.x / 32].v = m;
  __syncthreads();
  m = -INFINITY;
  for (int j = 0; j < kWarps; ++j) m = fmaxf(m, s.best[j].v);
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    sum += exp(static_cast<double>(x[i]) - static_cast<double>(m));
  }
  sum = WarpSumF64(sum);
  if (threadIdx.x % 32 == 0) dsum[threadIdx.x / 32] = sum;
  __syncthreads();
  sum = 0.0;
  for (int j = 0; j < kWarps; ++j) sum += dsum[j];
  const double log_z = static_cast<double>(m) + log(sum);

  const int k = min(row.num_candidates, kMaxBeamCandidates);
  auto allowed = [&](uint32_t, int64_t i) { return !(banned[i / 32] >> (i % 32) & 1u); };
  const Cut cut = Select(
      x, vocab, allowed, [](int64_t) -> u64 { return 1; }, static_cast<u64>(k), s);
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const uint32_t key = OrderKey(x[i]);
    if (!allowed(key, i) || !cut.Keeps(key, i)) continue;
    const int slot = atomicAdd(&num_kept, 1);
    if (slot < k) kept[slot] = KeyId{key, static_cast<int32_t>(i)};
  }
  __syncthreads();
  // Bitonic sort of the first power of two >= k entries, padded past the end.
  int size = 1;
  while (size < k) size <<= 1;
  const int have = min(num_kept, k);
  for (int j = have + threadIdx.x; j < size; j += kThreads)
    kept[j] = KeyId{0xffffffffu, 0x7fffffff};
  __syncthreads();
  for (int block = 2; block <= size; block <<= 1) {
    for (int stride = block / 2; stride > 0; stride >>= 1) {
      for (int j = threadIdx.x; j < size; j += kThreads) {
        const int partner = j ^ stride;
        if (partner > j) {
          const bool ascending = (j & block) == 0;
          const KeyId a = kept[j], b = kept[partner];
          if (Less(b, a) == ascending) {
            kept[j] = b;
            kept[partner] = a;
          }
        }
      }
      __syncthreads();
    }
  }
  for (int j = threadIdx.x; j < have; j += kThreads) {
    const int32_t id = kept[j].id;
    ids[row.out_begin + j] = id;
    logprobs[row.out_begin + j] = static_cast<double>(x[id]) - log_z;
  }
  for (int j = have + threadIdx.x; j < k; j += kThreads) {  // fewer allowed ids than asked
    ids[row.out_begin + j] = -1;
    logprobs[row.out_begin + j] = -INFINITY;
  }
}

}  // namespace

cudaError_t LaunchBeamCandidates(const float* logits, int64_t vocab, const BeamRow* rows, int64_t n,
                                 const int32_t* suppress_ids, int32_t* ids, double* logprobs,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (n < 0 || n > (1ll << 31) - 1 || vocab <= 0 || vocab > kMaxBeamVocab) {
    return cudaErrorInvalidValue;
  }
  const size_t smem = (vocab + 31) / 32 * sizeof(uint32_t);
  BeamKernel<<<static_cast<unsigned>(n), kThreads, smem, stream>>>(logits, vocab, rows,
                                                                   suppress_ids, ids, logprobs);
  return cudaGetLastError();
}

cudaError_t LaunchApplyPenalties(const float* logits, int64_t vocab, const PenaltyRow* rows,
                                 int64_t n, const PenaltyEntry* history,
                                 const int32_t* suppress_ids, float* work, cudaStream_t stream) {
  if (n < 0 || n > (1ll << 31) - 1 || vocab <= 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  PenaltyKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, vocab, rows, history,
                                                                   suppress_ids, work);
  return cudaGetLastError();
}

cudaError_t LaunchSample(const float* logits, const float* work, int64_t vocab,
                         const SampleRow* rows, int64_t n, GreedyResult* out, cudaStream_t stream) {
  if (n < 0 || n > (1ll << 31) - 1 || vocab <= 0 || vocab > (1ll << 31) - 1) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) return cudaSuccess;
  SampleKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, work, vocab, rows, out);
  return cudaGetLastError();
}

}  // namespace pagellm::kernels::cuda
