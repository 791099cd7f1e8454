// The emulator's scheduler (one fiber per CUDA thread of the running block), its warp
// collectives and tensor-core tile, and host work on streams (Enqueue). The CUDA runtime API is
// runtime_api.cc. See cuda_emu.h for the contract.
#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "kernels/cuda/emu/cuda_emu.h"
#include "kernels/cuda/emu/runtime_internal.h"

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
};

Emulator& E() {
  static Emulator* e = new Emulator;
  return *e;
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
    internal::SetPending(err);
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
  if (err != cudaSuccess) internal::SetPending(err);
  return err;
}

}  // namespace

cudaError_t Enqueue(cudaStream_t stream, std::function<cudaError_t()> work) {
  auto* s = reinterpret_cast<internal::Stream*>(stream);
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
