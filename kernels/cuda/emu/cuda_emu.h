// A CPU emulation of the CUDA execution model, for running pagellm's own kernels without a GPU.
//
// Not a product path and not a performance model: it exists so that the kernels' logic (index
// arithmetic, barriers, warp collectives, tensor-core fragment layouts, launch limits) is
// executed and checked against the float64 references on any machine, in CI, before the rare
// minutes on a real GPU. kernels/cuda/emu/translate.py rewrites a .cu file into C++ that
// includes this header first: launches `k<<<g, b, s, st>>>(args)` become `Launch(...)`,
// `__shared__` arrays become block-wide statics registered with the emulator (poisoned with 0xFF
// at every block's start, their bytes counted against the launch's shared-memory limit), and the
// `mma.sync` inline assembly becomes `MmaM16n8k16`.
//
// Execution: the blocks of a launch run one after another; a block's threads are fibers on the
// calling thread, each running until it reaches a barrier or a warp collective, in index order
// in blocks of even linear index and in reverse in odd ones (so a missing barrier or a
// warp-synchronous assumption shows, whichever way the data flows). `__syncthreads`
// releases when every live thread of the block waits there; a warp collective completes when
// every live lane named in its mask waits at one, and its results follow the PTX definitions.
// Anything the hardware leaves undefined that the emulator can see -- a warp collective whose
// mask names an exited lane or one waiting at a block barrier, lanes of one warp at different
// kinds of collective, a deadlock, a launch over the device's limits -- fails the launch with
// a message on stderr and a sticky error (cudaErrorLaunchFailure or
// cudaErrorInvalidConfiguration), as a faulting kernel would.
//
// Thread-safety: launches are serialized by one mutex; the runtime functions may be called from
// any thread.
#ifndef PAGELLM_KERNELS_CUDA_EMU_CUDA_EMU_H_
#define PAGELLM_KERNELS_CUDA_EMU_CUDA_EMU_H_

// Function-space qualifiers mean nothing on the host: define them before the CUDA headers do.
#define __host__
#define __device__
#define __global__
#define __launch_bounds__(...)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

namespace cuda_emu {

// Runs `body` once per thread of every block of the grid. Returns the launch's error (also
// recorded as the last error), cudaSuccess when every thread finished.
cudaError_t Launch(dim3 grid, dim3 block, size_t dynamic_shared, cudaStream_t stream,
                   const std::function<void()>& body);

// Runs `work` now, or records it when `stream` is being captured (then a graph launch runs it).
// For host-side work on a stream, such as an emulated library call.
cudaError_t Enqueue(cudaStream_t stream, std::function<cudaError_t()> work);

// The calling fiber's coordinates.
const uint3& ThreadIdx();
const uint3& BlockIdx();
const dim3& BlockDim();
const dim3& GridDim();

// Block-wide storage: the first call in a block for `p` poisons its bytes; all of them count
// towards the launch's shared memory.
void RegisterShared(void* p, size_t bytes);
void* DynamicShared();

void SyncThreads();

// Warp collectives on 64-bit payloads: kind, the caller's value, its source lane (shuffles) and
// the mask. Returns the value the caller receives.
enum class WarpOp { kShfl, kShflUp, kShflDown, kShflXor, kBallot };
uint64_t WarpCollective(WarpOp op, unsigned mask, uint64_t value, int arg, int width);

// D = A x B + C for one m16n8k16 tile, fragments as PTX lays them out (row-major A, column-major
// B, fp32 C/D); `bf16` picks the input type (else fp16). Warp-collective.
void MmaM16n8k16(bool bf16, float& c0, float& c1, float& c2, float& c3, uint32_t a0, uint32_t a1,
                 uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1);

// One element of an emulated library's buffer (cuBLAS, NCCL), read as or written from a float
// (rounded to nearest even for the 16-bit types).
enum class Element { kF32, kF16, kBF16 };
inline float ReadElement(const void* p, Element t, size_t i) {
  switch (t) {
    case Element::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Element::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case Element::kF32:
      break;
  }
  return static_cast<const float*>(p)[i];
}
inline void WriteElement(void* p, Element t, size_t i, float v) {
  switch (t) {
    case Element::kBF16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      return;
    case Element::kF16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      return;
    case Element::kF32:
      break;
  }
  static_cast<float*>(p)[i] = v;
}

template <typename T>
T Shuffle(WarpOp op, unsigned mask, T v, int arg, int width) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle payload");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = WarpCollective(op, mask, bits, arg, width);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

}  // namespace cuda_emu

#define threadIdx (::cuda_emu::ThreadIdx())
#define blockIdx (::cuda_emu::BlockIdx())
#define blockDim (::cuda_emu::BlockDim())
#define gridDim (::cuda_emu::GridDim())

inline void __syncthreads() { ::cuda_emu::SyncThreads(); }

template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::cuda_emu::Shuffle(::cuda_emu::WarpOp::kShfl, mask, v, src, width);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::cuda_emu::Shuffle(::cuda_emu::WarpOp::kShflUp, mask, v, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::cuda_emu::Shuffle(::cuda_emu::WarpOp::kShflDown, mask, v, static_cast<int>(delta),
                             width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::cuda_emu::Shuffle(::cuda_emu::WarpOp::kShflXor, mask, v, lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return static_cast<unsigned>(
      ::cuda_emu::WarpCollective(::cuda_emu::WarpOp::kBallot, mask, predicate != 0, 0, 32));
}

// Atomics: fibers switch only at collectives, so a read-modify-write is atomic as written.
template <typename T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <typename T>
T atomicOr(T* p, T v) {
  const T old = *p;
  *p = old | v;
  return old;
}
template <typename T>
T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}

// Intrinsics without a host definition. The _rn forms forbid contraction on the device; the
// host build compiles these files with -ffp-contract=off so they hold here too.
inline float __expf(float x) { return expf(x); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline unsigned long long __float2ull_rn(float x) {
  return x > 0.0f ? static_cast<unsigned long long>(nearbyintf(x)) : 0ull;  // NaN, <= 0: 0
}
inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
// Device overloads of min/max take mixed argument types.
template <typename A, typename B>
std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}
template <typename A, typename B>
std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}
using std::isfinite;
using std::isinf;
using std::isnan;

inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }

#endif  // PAGELLM_KERNELS_CUDA_EMU_CUDA_EMU_H_
