// One block per token. Work items 0 .. (H + Hkv) * d/2 - 1 are rotation pairs of Q then K
// heads; the next Hkv * d items are V elements. A pair is read and written by one thread, so
// rotating Q in place needs no barrier.
#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/rope_kv.h"

namespace pagellm::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void RopeKvKernel(RopeKvParams p) {
  const int64_t t = blockIdx.x;
  const int64_t d = p.kv.head_dim, half = d / 2, hkv = p.kv.num_kv_heads;
  T* row = static_cast<T*>(p.qkv) + t * p.qkv_stride;
  const float* cs = p.cos_sin + static_cast<int64_t>(p.positions[t]) * d;
  const PagedKvShape shape = p.kv.shape();
  const int64_t slot = p.slots[t];
  T* kc = static_cast<T*>(p.kv.k);
  T* vc = static_cast<T*>(p.kv.v);
  const int64_t pairs = (p.num_heads + hkv) * half;
  const int64_t items = pairs + hkv * d;
  for (int64_t w = threadIdx.x; w < items; w += blockDim.x) {
    if (w < pairs) {
      const int64_t h = w / half, i = w % half;
      const int64_t a = p.neox ? i : 2 * i, b = p.neox ? i + half : 2 * i + 1;
      const int64_t col = h * d;
      float x0 = ToFloat(row[col + a]), x1 = ToFloat(row[col + b]);
      if (p.bias != nullptr) {
        x0 += p.bias[col + a];
        x1 += p.bias[col + b];
      }
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const T y0 = FromFloat<T>(x0 * c - x1 * s), y1 = FromFloat<T>(x0 * s + x1 * c);
      if (h < p.num_heads) {
        row[col + a] = y0;
        row[col + b] = y1;
      } else {
        T* dst = kc + shape.offset(slot, h - p.num_heads);
        dst[a] = y0;
        dst[b] = y1;
      }
    } else {
      const int64_t e = w - pairs, g = e / d, i = e % d;
      const int64_t col = (p.num_heads + hkv + g) * d + i;
      float v = ToFloat(row[col]);
      if (p.bias != nullptr) v += p.bias[col];
      vc[shape.offset(slot, g) + i] = FromFloat<T>(v);
    }
  }
}

}  // namespace

cudaError_t LaunchRopeKv(const RopeKvParams& p, cudaStream_t stream) {
  if (p.num_tokens < 0 || p.num_tokens > (1ll << 31) - 1 || p.kv.head_dim <= 0 ||
      p.kv.head_dim % 2 != 0 || p.num_heads <= 0 || p.kv.num_kv_heads <= 0 ||
      (p.kv.dtype != KvDtype::kBF16 && p.kv.dtype != KvDtype::kF16)) {
    return cudaErrorInvalidValue;
  }
  if (p.num_tokens == 0) return cudaSuccess;
  PAGELLM_DISPATCH_HALF(p.kv.dtype, T,
                        RopeKvKernel<T>
                        <<<static_cast<unsigned>(p.num_tokens), kThreads, 0, stream>>>(p));
  return cudaGetLastError();
}

}  // namespace pagellm::kernels::cuda
