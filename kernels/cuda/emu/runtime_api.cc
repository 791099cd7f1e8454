// The CUDA runtime functions the backend and the kernel tests call (memory, streams, capture and
// graphs, events, errors, the device's properties), over host memory; and the sticky error of a
// failed launch. The scheduler that runs launches is runtime.cc. See cuda_emu.h for the contract.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "kernels/cuda/emu/cuda_emu.h"
#include "kernels/cuda/emu/runtime_internal.h"

namespace cuda_emu::internal {
namespace {

std::mutex error_mu;
cudaError_t pending = cudaSuccess;  // returned once by the next query

}  // namespace

void SetPending(cudaError_t e) {
  std::lock_guard<std::mutex> l(error_mu);
  if (pending == cudaSuccess) pending = e;
}

cudaError_t TakePending() {
  std::lock_guard<std::mutex> l(error_mu);
  const cudaError_t e = pending;
  pending = cudaSuccess;
  return e;
}

cudaError_t PeekPending() {
  std::lock_guard<std::mutex> l(error_mu);
  return pending;
}

}  // namespace cuda_emu::internal

extern "C" {

namespace {

using cuda_emu::internal::Graph;
using cuda_emu::internal::Stream;

struct Event {
  std::chrono::steady_clock::time_point at;
};

// Device and pinned host memory: host allocations, counted against the device's size.
struct Memory {
  std::mutex mu;
  std::map<void*, size_t> allocations;  // device memory: bytes
  std::set<void*> host_allocations;     // pinned host memory
  size_t allocated = 0;
  size_t total = 0;  // the device's memory: CUDA_EMU_MEMORY_MIB or 2 GiB
};

Memory& M() {
  static Memory* m = new Memory;
  return *m;
}

// Streams capturing on this thread (cudaStreamCaptureModeThreadLocal): synchronous calls fail.
thread_local int capturing_here = 0;

size_t TotalMemory() {
  std::lock_guard<std::mutex> l(M().mu);
  if (M().total == 0) {
    const char* mib = std::getenv("CUDA_EMU_MEMORY_MIB");
    M().total =
        (mib != nullptr && std::atoll(mib) > 0 ? std::atoll(mib) : 2048) * (size_t{1} << 20);
  }
  return M().total;
}

// Calls a synchronous API may not make while this thread captures a stream.
bool CaptureForbids() { return capturing_here > 0; }

}  // namespace

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (CaptureForbids()) return cudaErrorStreamCaptureUnsupported;
  const size_t total = TotalMemory(), rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  std::lock_guard<std::mutex> l(M().mu);
  if (M().allocated + rounded > total) return cudaErrorMemoryAllocation;
  *p = std::aligned_alloc(256, rounded);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  M().allocations[*p] = rounded;
  M().allocated += rounded;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> l(M().mu);
    auto it = M().allocations.find(p);
    if (it == M().allocations.end()) return cudaErrorInvalidValue;
    M().allocated -= it->second;
    M().allocations.erase(it);
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) {
  *p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  std::lock_guard<std::mutex> l(M().mu);
  M().host_allocations.insert(*p);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> l(M().mu);
    if (M().host_allocations.erase(p) == 0) return cudaErrorInvalidValue;
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  *total = TotalMemory();
  std::lock_guard<std::mutex> l(M().mu);
  *free = *total - M().allocated;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (CaptureForbids()) return cudaErrorStreamCaptureUnsupported;
  const cudaError_t e = cuda_emu::internal::TakePending();
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
  return cuda_emu::internal::TakePending();
}
cudaError_t cudaGetLastError() { return cuda_emu::internal::TakePending(); }
cudaError_t cudaPeekAtLastError() { return cuda_emu::internal::PeekPending(); }

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = reinterpret_cast<cudaStream_t>(new Stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  auto* s = reinterpret_cast<Stream*>(stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  if (s->capture != nullptr) return cudaErrorStreamCaptureUnsupported;
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  auto* s = reinterpret_cast<Stream*>(stream);
  if (CaptureForbids() || (s != nullptr && s->capture != nullptr)) {
    return cudaErrorStreamCaptureUnsupported;
  }
  return cuda_emu::internal::TakePending();
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  auto* s = reinterpret_cast<Stream*>(stream);
  if (s != nullptr && s->capture != nullptr) return cudaErrorStreamCaptureUnsupported;
  return cudaSuccess;  // the work is done: it ran at the call
}

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned int) {
  return event == nullptr ? cudaErrorInvalidResourceHandle : cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  auto* s = reinterpret_cast<Stream*>(stream);
  if (s == nullptr) return cudaErrorStreamCaptureUnsupported;  // the legacy default stream
  if (s->capture != nullptr) return cudaErrorIllegalState;
  s->capture = new Graph;
  ++capturing_here;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  auto* s = reinterpret_cast<Stream*>(stream);
  if (s == nullptr || s->capture == nullptr) return cudaErrorIllegalState;
  *graph = reinterpret_cast<cudaGraph_t>(s->capture);
  s->capture = nullptr;
  --capturing_here;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (graph == nullptr) return cudaErrorInvalidValue;
  *exec = reinterpret_cast<cudaGraphExec_t>(new Graph(*reinterpret_cast<Graph*>(graph)));
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  auto* nodes = reinterpret_cast<Graph*>(exec);
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
  delete reinterpret_cast<Graph*>(exec);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<Graph*>(graph);
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
  *event = reinterpret_cast<cudaEvent_t>(new Event);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  return cudaEventCreate(event);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<Event*>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  auto* ev = reinterpret_cast<Event*>(event);
  if (ev == nullptr) return cudaErrorInvalidResourceHandle;
  return cuda_emu::Enqueue(stream, [ev] {
    ev->at = std::chrono::steady_clock::now();
    return cudaSuccess;
  });
}

cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  const auto& a = reinterpret_cast<Event*>(start)->at;
  const auto& b = reinterpret_cast<Event*>(end)->at;
  *ms = std::chrono::duration<float, std::milli>(b - a).count();
  return cudaSuccess;
}

}  // extern "C"
