// The emulator's scheduler (one fiber per CUDA thread of the running block), its warp
// collectives and tensor-core tile, and the few CUDA runtime functions the kernel tests call,
// over host memory. See cuda_emu.h for the contract.
#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "kernels/cuda/emu/cuda_emu.h"

namespace cuda_emu {
namespace {

constexpr size_t kStackBytes = 256 << 10;
constexpr size_t kSharedLimit = 48 << 10;  // static + dynamic, without an opt-in attribute
constexpr int kWarpSize = 32;

enum class State { kRunnable, kBarrier, kWarp, kDone };

// Hands out one fiber's stack, allocated once and reused by every block.
class ReusedStack {
 public:
  explicit ReusedStack(char* base) : base_(base) {}
  boost::context::stack_context allocate() {
    boost::context::stack_context sc;
    sc.size = kStackBytes;
    sc.sp = base_ + kStackBytes;  // stacks grow down
    return sc;
  }
  void deallocate(boost::context::stack_context&) {}

 private:
  char* base_;
};

struct Fiber {
  boost::context::fiber ctx;   // the CUDA thread, while suspended
  boost::context::fiber sink;  // the scheduler, while the thread runs
  std::unique_ptr<char[]> stack;
  State state = State::kDone;
  uint3 tid;
  // The pending warp collective.
  bool mma = false;
  WarpOp op = WarpOp::kShfl;
  unsigned mask = 0;
  uint64_t value = 0, result = 0;
  int arg = 0, width = kWarpSize;
  bool mma_bf16 = false;
  uint32_t a[4] = {}, b[2] = {};
  float c[4] = {};
};

struct Emulator {
  std::mutex launch_mu;
  std::mutex error_mu;
  cudaError_t pending = cudaSuccess;  // returned once by the next query

  // The running launch (under launch_mu).
  std::vector<Fiber> fibers;
  Fiber* current = nullptr;
  dim3 grid, block;
  uint3 block_idx;
  const std::function<void()>* body = nullptr;
  std::vector<char> dynamic_shared;
  std::unordered_set<void*> shared_this_block;
  size_t static_shared = 0;
  std::string failure;

  std::mutex alloc_mu;
  std::map<void*, size_t> allocations;  // device memory: bytes
  std::set<void*> host_allocations;     // pinned host memory
  size_t allocated = 0;
  size_t total = 0;  // the device's memory: CUDA_EMU_MEMORY_MIB or 2 GiB
};

// A stream records instead of running while it is being captured.
struct Stream {
  std::vector<std::function<cudaError_t()>>* capture = nullptr;
};

struct Event {
  std::chrono::steady_clock::time_point at;
};

// Streams capturing on this thread (cudaStreamCaptureModeThreadLocal): synchronous calls fail.
thread_local int capturing_here = 0;

Emulator& E() {
  static Emulator* e = new Emulator;
  return *e;
}

void SetPending(cudaError_t e) {
  std::lock_guard<std::mutex> l(E().error_mu);
  if (E().pending == cudaSuccess) E().pending = e;
}

cudaError_t TakePending() {
  std::lock_guard<std::mutex> l(E().error_mu);
  const cudaError_t e = E().pending;
  E().pending = cudaSuccess;
  return e;
}

Fiber& Current() {
  if (E().current == nullptr) {
    std::fprintf(stderr, "cuda_emu: device code called outside a kernel\n");
    std::abort();
  }
  return *E().current;
}

void Yield(Fiber& f) { f.sink = std::move(f.sink).resume(); }

void Fail(std::string message) {
  if (E().failure.empty()) E().failure = std::move(message);
}

std::string Where(int linear) {
  const dim3& b = E().block;
  const uint3& bi = E().block_idx;
  return "block (" + std::to_string(bi.x) + "," + std::to_string(bi.y) + "," +
         std::to_string(bi.z) + ") thread " + std::to_string(linear) + " of " +
         std::to_string(b.x * b.y * b.z);
}

float Element(bool bf16, uint32_t reg, int half) {
  const uint16_t bits = static_cast<uint16_t>(half ? reg >> 16 : reg & 0xFFFF);
  if (bf16) {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __bfloat162float(__nv_bfloat16(raw));
  }
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

// PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type": groupID = lane / 4,
// t = lane % 4. A: a0 (row g, cols 2t, 2t+1), a1 (row g+8, same cols), a2 (row g, cols 2t+8,
// 2t+9), a3 (row g+8, cols 2t+8, 2t+9), the lower column in the low half. B: b0 (rows 2t,
// 2t+1 of column g), b1 (rows 2t+8, 2t+9). C/D: c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g+8).
void CompleteMma(Fiber* lanes[kWarpSize]) {
  const bool bf16 = lanes[0]->mma_bf16;
  float a[16][16], b[16][8], c[16][8];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const Fiber& f = *lanes[lane];
    const int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {
      a[g][2 * t + h] = Element(bf16, f.a[0], h);
      a[g + 8][2 * t + h] = Element(bf16, f.a[1], h);
      a[g][2 * t + 8 + h] = Element(bf16, f.a[2], h);
      a[g + 8][2 * t + 8 + h] = Element(bf16, f.a[3], h);
      b[2 * t + h][g] = Element(bf16, f.b[0], h);
      b[2 * t + 8 + h][g] = Element(bf16, f.b[1], h);
      c[g][2 * t + h] = f.c[h];
      c[g + 8][2 * t + h] = f.c[2 + h];
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    Fiber& f = *lanes[lane];
    const int g = lane / 4, t = lane % 4;
    const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    for (int i = 0; i < 4; ++i) {
      float acc = c[rows[i]][cols[i]];
      for (int k = 0; k < 16; ++k) acc += a[rows[i]][k] * b[k][cols[i]];
      f.c[i] = acc;
    }
  }
}

// Completes warp w's pending collective if every lane it names waits at one; returns whether it
// did. Records a failure for what the hardware leaves undefined.
bool ResolveWarp(int w, int n) {
  std::vector<Fiber>& fibers = E().fibers;
  const int first = w * kWarpSize;
  Fiber* lanes[kWarpSize] = {};
  const Fiber* leader = nullptr;
  for (int lane = 0; lane < kWarpSize && first + lane < n; ++lane) {
    lanes[lane] = &fibers[first + lane];
    if (lanes[lane]->state == State::kWarp && leader == nullptr) leader = lanes[lane];
  }
  if (leader == nullptr) return false;
  const unsigned mask = leader->mma ? 0xFFFFFFFFu : leader->mask;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const bool named = (mask >> lane) & 1;
    Fiber* f = lanes[lane];
    if (f == nullptr) {
      if (named) {
        Fail("warp collective names lane " + std::to_string(lane) + " past the block (" +
             Where(first) + ")");
        return false;
      }
      continue;
    }
    if (f->state == State::kWarp) {
      if (f->mma != leader->mma || f->op != leader->op || f->mask != leader->mask) {
        Fail("lanes of one warp at different collectives (" + Where(first + lane) + ")");
        return false;
      }
      if (!named) {
        Fail("a lane outside its own collective's mask (" + Where(first + lane) + ")");
        return false;
      }
    } else if (named) {
      Fail(std::string("warp collective names a lane that ") +
           (f->state == State::kDone ? "exited" : "waits at __syncthreads") + " (" +
           Where(first + lane) + ")");
      return false;
    }
  }
  if (leader->mma) {
    CompleteMma(lanes);
  } else if (leader->op == WarpOp::kBallot) {
    unsigned bits = 0;
    for (int lane = 0; lane < kWarpSize; ++lane) {
      if (((mask >> lane) & 1) && lanes[lane]->value != 0) bits |= 1u << lane;
    }
    for (int lane = 0; lane < kWarpSize; ++lane) {
      if ((mask >> lane) & 1) lanes[lane]->result = bits;
    }
  } else {
    for (int lane = 0; lane < kWarpSize; ++lane) {
      if (!((mask >> lane) & 1)) continue;
      Fiber& f = *lanes[lane];
      const int width = f.width;
      if (width <= 0 || width > kWarpSize || (width & (width - 1)) != 0) {
        Fail("shuffle width " + std::to_string(width) + " (" + Where(first + lane) + ")");
        return false;
      }
      const int base = lane & ~(width - 1);
      int src = lane;
      switch (f.op) {
        case WarpOp::kShfl:
          src = base + (f.arg & (width - 1));
          break;
        case WarpOp::kShflUp:
          src = lane - f.arg >= base ? lane - f.arg : lane;
          break;
        case WarpOp::kShflDown:
          src = lane + f.arg < base + width ? lane + f.arg : lane;
          break;
        case WarpOp::kShflXor:
          src = (lane ^ f.arg) < base + width && (lane ^ f.arg) >= base ? lane ^ f.arg : lane;
          break;
        case WarpOp::kBallot:
          break;
      }
      if (!((mask >> src) & 1)) {
        Fail("shuffle reads lane " + std::to_string(src) + ", outside the mask (" +
             Where(first + lane) + ")");
        return false;
      }
      f.result = lanes[src]->value;
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if ((mask >> lane) & 1) lanes[lane]->state = State::kRunnable;
  }
  return true;
}

// Runs one block to completion; false (with E().failure set) when it cannot.
bool RunBlock() {
  Emulator& e = E();
  const int n = static_cast<int>(e.block.x * e.block.y * e.block.z);
  if (static_cast<int>(e.fibers.size()) < n) e.fibers.resize(n);
  e.shared_this_block.clear();
  e.static_shared = 0;
  if (!e.dynamic_shared.empty()) {
    std::memset(e.dynamic_shared.data(), 0xFF, e.dynamic_shared.size());
  }
  for (int i = 0; i < n; ++i) {
    Fiber& f = e.fibers[i];
    if (!f.stack) f.stack.reset(new char[kStackBytes]);
    f.state = State::kRunnable;
    f.tid = {static_cast<unsigned>(i) % e.block.x,
             (static_cast<unsigned>(i) / e.block.x) % e.block.y,
             static_cast<unsigned>(i) / (e.block.x * e.block.y)};
    f.ctx = boost::context::fiber(std::allocator_arg, ReusedStack(f.stack.get()),
                                  [i](boost::context::fiber&& sink) {
                                    Fiber& self = E().fibers[i];
                                    self.sink = std::move(sink);
                                    (*E().body)();
                                    self.state = State::kDone;
                                    return std::move(self.sink);
                                  });
  }
  // Threads run in index order in even blocks and in reverse in odd ones, so that a missing
  // barrier shows whichever way the data flows.
  const uint64_t linear_block =
      e.block_idx.x + uint64_t{e.grid.x} * (e.block_idx.y + uint64_t{e.grid.y} * e.block_idx.z);
  const bool reverse = linear_block % 2 == 1;
  for (;;) {
    for (int k = 0; k < n; ++k) {
      Fiber& f = e.fibers[reverse ? n - 1 - k : k];
      if (f.state != State::kRunnable) continue;
      e.current = &f;
      f.ctx = std::move(f.ctx).resume();
      e.current = nullptr;
      if (!e.failure.empty()) return false;
    }
    bool live = false, released = false;
    for (int w = 0; w * kWarpSize < n; ++w) {
      released |= ResolveWarp(w, n);
      if (!e.failure.empty()) return false;
    }
    if (released) continue;
    bool all_at_barrier = true;
    for (int i = 0; i < n; ++i) {
      const State s = e.fibers[i].state;
      if (s != State::kDone) live = true;
      if (s == State::kWarp) all_at_barrier = false;
    }
    if (!live) break;
    if (!all_at_barrier) {
      Fail("deadlock: warp collectives wait on lanes that never arrive (" + Where(0) + ")");
      return false;
    }
    for (int i = 0; i < n; ++i) {
      if (e.fibers[i].state == State::kBarrier) e.fibers[i].state = State::kRunnable;
    }
  }
  if (e.static_shared + e.dynamic_shared.size() > kSharedLimit) {
    Fail("shared memory " + std::to_string(e.static_shared) + " static + " +
         std::to_string(e.dynamic_shared.size()) + " dynamic bytes exceeds the 48 KiB a block " +
         "gets without cudaFuncAttributeMaxDynamicSharedMemorySize");
    return false;
  }
  return true;
}

}  // namespace

namespace {

// Runs a launch now. Every stream is one in-order queue executed at the call: the launch is
// complete when this returns.
cudaError_t Execute(dim3 grid, dim3 block, size_t dynamic_shared,
                    const std::function<void()>& body) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  cudaError_t err = cudaSuccess;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.x > 0x7FFFFFFFu || grid.y > 65535 || grid.z > 65535 || dynamic_shared > kSharedLimit) {
    std::fprintf(stderr,
                 "cuda_emu: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u) "
                 "dynamic shared %zu\n",
                 grid.x, grid.y, grid.z, block.x, block.y, block.z, dynamic_shared);
    err = cudaErrorInvalidConfiguration;
    SetPending(err);
    return err;
  }
  std::lock_guard<std::mutex> l(E().launch_mu);
  Emulator& e = E();
  e.grid = grid;
  e.block = block;
  e.body = &body;
  e.failure.clear();
  e.dynamic_shared.assign(dynamic_shared, 0);
  for (unsigned z = 0; z < grid.z && err == cudaSuccess; ++z) {
    for (unsigned y = 0; y < grid.y && err == cudaSuccess; ++y) {
      for (unsigned x = 0; x < grid.x && err == cudaSuccess; ++x) {
        e.block_idx = {x, y, z};
        if (!RunBlock()) {
          std::fprintf(stderr, "cuda_emu: kernel failed: %s\n", e.failure.c_str());
          err = cudaErrorLaunchFailure;
          for (Fiber& f : e.fibers) f.ctx = boost::context::fiber();  // unwinds the abandoned
        }
      }
    }
  }
  e.body = nullptr;
  if (err != cudaSuccess) SetPending(err);
  return err;
}

}  // namespace

cudaError_t Enqueue(cudaStream_t stream, std::function<cudaError_t()> work) {
  auto* s = reinterpret_cast<Stream*>(stream);
  if (s != nullptr && s->capture != nullptr) {
    s->capture->push_back(std::move(work));
    return cudaSuccess;
  }
  return work();
}

cudaError_t Launch(dim3 grid, dim3 block, size_t dynamic_shared, cudaStream_t stream,
                   const std::function<void()>& body) {
  return Enqueue(stream, [grid, block, dynamic_shared, body] {
    return Execute(grid, block, dynamic_shared, body);
  });
}

const uint3& ThreadIdx() { return Current().tid; }
const uint3& BlockIdx() {
  Current();
  return E().block_idx;
}
const dim3& BlockDim() {
  Current();
  return E().block;
}
const dim3& GridDim() {
  Current();
  return E().grid;
}

void RegisterShared(void* p, size_t bytes) {
  Current();
  if (E().shared_this_block.insert(p).second) {
    std::memset(p, 0xFF, bytes);
    E().static_shared += bytes;
  }
}

void* DynamicShared() {
  Current();
  return E().dynamic_shared.empty() ? nullptr : E().dynamic_shared.data();
}

void SyncThreads() {
  Fiber& f = Current();
  f.state = State::kBarrier;
  Yield(f);
}

uint64_t WarpCollective(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  Fiber& f = Current();
  f.mma = false;
  f.op = op;
  f.mask = mask;
  f.value = value;
  f.arg = arg;
  f.width = width;
  f.state = State::kWarp;
  Yield(f);
  return f.result;
}

void MmaM16n8k16(bool bf16, float& c0, float& c1, float& c2, float& c3, uint32_t a0, uint32_t a1,
                 uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  Fiber& f = Current();
  f.mma = true;
  f.mma_bf16 = bf16;
  f.mask = 0xFFFFFFFFu;
  f.a[0] = a0, f.a[1] = a1, f.a[2] = a2, f.a[3] = a3;
  f.b[0] = b0, f.b[1] = b1;
  f.c[0] = c0, f.c[1] = c1, f.c[2] = c2, f.c[3] = c3;
  f.state = State::kWarp;
  Yield(f);
  c0 = f.c[0], c1 = f.c[1], c2 = f.c[2], c3 = f.c[3];
}

}  // namespace cuda_emu

// The runtime functions the kernel tests use, over host memory.
using cuda_emu::E;

extern "C" {

namespace {

size_t TotalMemory() {
  std::lock_guard<std::mutex> l(E().alloc_mu);
  if (E().total == 0) {
    const char* mib = std::getenv("CUDA_EMU_MEMORY_MIB");
    E().total =
        (mib != nullptr && std::atoll(mib) > 0 ? std::atoll(mib) : 2048) * (size_t{1} << 20);
  }
  return E().total;
}

// Calls a synchronous API may not make while this thread captures a stream.
bool CaptureForbids() { return cuda_emu::capturing_here > 0; }

}  // namespace

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (CaptureForbids()) return cudaErrorStreamCaptureUnsupported;
  const size_t total = TotalMemory(), rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  std::lock_guard<std::mutex> l(E().alloc_mu);
  if (E().allocated + rounded > total) return cudaErrorMemoryAllocation;
  *p = std::aligned_alloc(256, rounded);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  E().allocations[*p] = rounded;
  E().allocated += rounded;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> l(E().alloc_mu);
    auto it = E().allocations.find(p);
    if (it == E().allocations.end()) return cudaErrorInvalidValue;
    E().allocated -= it->second;
    E().allocations.erase(it);
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) {
  *p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  std::lock_guard<std::mutex> l(E().alloc_mu);
  E().host_allocations.insert(*p);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> l(E().alloc_mu);
    if (E().host_allocations.erase(p) == 0) return cudaErrorInvalidValue;
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  *total = TotalMemory();
  std::lock_guard<std::mutex> l(E().alloc_mu);
  *free = *total - E().allocated;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (CaptureForbids()) return cudaErrorStreamCaptureUnsupported;
  const cudaError_t e = cuda_emu::TakePending();
  if (e != cudaSuccess) return e;
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  return cuda_emu::Enqueue(stream, [dst, src, bytes] {
    if (bytes > 0) std::memmove(dst, src, bytes);
    return cudaSuccess;
  });
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind, cudaStream_t stream) {
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  return cuda_emu::Enqueue(stream, [=] {
    for (size_t r = 0; r < height; ++r) {
      std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch,
                   width);
    }
    return cudaSuccess;
  });
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  if (CaptureForbids()) return cudaErrorStreamCaptureUnsupported;
  if (bytes > 0) std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (CaptureForbids()) return cudaErrorStreamCaptureUnsupported;
  return cuda_emu::TakePending();
}
cudaError_t cudaGetLastError() { return cuda_emu::TakePending(); }
cudaError_t cudaPeekAtLastError() {
  std::lock_guard<std::mutex> l(E().error_mu);
  return E().pending;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = reinterpret_cast<cudaStream_t>(new cuda_emu::Stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  auto* s = reinterpret_cast<cuda_emu::Stream*>(stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  if (s->capture != nullptr) return cudaErrorStreamCaptureUnsupported;
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  auto* s = reinterpret_cast<cuda_emu::Stream*>(stream);
  if (CaptureForbids() || (s != nullptr && s->capture != nullptr)) {
    return cudaErrorStreamCaptureUnsupported;
  }
  return cuda_emu::TakePending();
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  auto* s = reinterpret_cast<cuda_emu::Stream*>(stream);
  if (s != nullptr && s->capture != nullptr) return cudaErrorStreamCaptureUnsupported;
  return cudaSuccess;  // the work is done: it ran at the call
}

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned int) {
  return event == nullptr ? cudaErrorInvalidResourceHandle : cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  auto* s = reinterpret_cast<cuda_emu::Stream*>(stream);
  if (s == nullptr) return cudaErrorStreamCaptureUnsupported;  // the legacy default stream
  if (s->capture != nullptr) return cudaErrorIllegalState;
  s->capture = new std::vector<std::function<cudaError_t()>>;
  ++cuda_emu::capturing_here;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  auto* s = reinterpret_cast<cuda_emu::Stream*>(stream);
  if (s == nullptr || s->capture == nullptr) return cudaErrorIllegalState;
  *graph = reinterpret_cast<cudaGraph_t>(s->capture);
  s->capture = nullptr;
  --cuda_emu::capturing_here;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (graph == nullptr) return cudaErrorInvalidValue;
  *exec = reinterpret_cast<cudaGraphExec_t>(new std::vector<std::function<cudaError_t()>>(
      *reinterpret_cast<std::vector<std::function<cudaError_t()>>*>(graph)));
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  auto* nodes = reinterpret_cast<std::vector<std::function<cudaError_t()>>*>(exec);
  if (nodes == nullptr) return cudaErrorInvalidValue;
  return cuda_emu::Enqueue(stream, [nodes] {
    for (const auto& node : *nodes) {
      const cudaError_t e = node();
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  });
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<std::vector<std::function<cudaError_t()>>*>(exec);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<std::vector<std::function<cudaError_t()>>*>(graph);
  return cudaSuccess;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    default:
      return "cudaError (cuda_emu)";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error (cuda_emu)";
    case cudaErrorInvalidValue:
      return "invalid argument (cuda_emu)";
    case cudaErrorMemoryAllocation:
      return "out of memory (cuda_emu)";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument (cuda_emu)";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure (cuda_emu: see stderr)";
    default:
      return "error (cuda_emu)";
  }
}

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  std::memset(p, 0, sizeof(*p));
  std::snprintf(p->name, sizeof(p->name), "pagellm CUDA emulation (CPU)");
  p->totalGlobalMem = TotalMemory();
  p->sharedMemPerBlock = 48 << 10;
  p->sharedMemPerBlockOptin = 227 << 10;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->multiProcessorCount = 132;
  p->major = 9;
  p->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = reinterpret_cast<cudaEvent_t>(new cuda_emu::Event);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  return cudaEventCreate(event);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<cuda_emu::Event*>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  auto* ev = reinterpret_cast<cuda_emu::Event*>(event);
  if (ev == nullptr) return cudaErrorInvalidResourceHandle;
  return cuda_emu::Enqueue(stream, [ev] {
    ev->at = std::chrono::steady_clock::now();
    return cudaSuccess;
  });
}

cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  const auto& a = reinterpret_cast<cuda_emu::Event*>(start)->at;
  const auto& b = reinterpret_cast<cuda_emu::Event*>(end)->at;
  *ms = std::chrono::duration<float, std::milli>(b - a).count();
  return cudaSuccess;
}

}  // extern "C"
