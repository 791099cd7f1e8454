// Owned CUDA memory and the one place CUDA errors become absl::Status. DeviceBuffer is
// cudaMalloc'd memory; PinnedBuffer is page-locked host memory (cudaHostAlloc) that async
// copies can read and write. Both free on destruction and move but do not copy.
//
// Thread-compatible.
#ifndef PAGELLM_WORKER_BACKEND_CUDA_DEVICE_MEMORY_H_
#define PAGELLM_WORKER_BACKEND_CUDA_DEVICE_MEMORY_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pagellm::cuda {

// OK for cudaSuccess; otherwise ResourceExhausted for out-of-memory, Internal for anything
// else, with `what` and the driver's error name and text.
absl::Status CudaStatus(cudaError_t err, absl::string_view what);

enum class MemoryKind { kDevice, kPinnedHost };

// `bytes` of device (cudaMalloc) or pinned host (cudaHostAlloc) memory, freed on destruction.
template <MemoryKind KIND>
class CudaMemory {
 public:
  CudaMemory() = default;
  // ResourceExhausted naming `what` and the size when there is no room; an empty buffer for
  // bytes <= 0.
  static absl::StatusOr<CudaMemory> Allocate(int64_t bytes, absl::string_view what);
  ~CudaMemory() { Free(); }
  CudaMemory(CudaMemory&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  CudaMemory& operator=(CudaMemory&& o) noexcept {
    if (this != &o) {
      Free();
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = nullptr;
    }
    return *this;
  }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  [[nodiscard]] void* get() const { return ptr_; }
  template <typename T>
  [[nodiscard]] T* as() const {
    return static_cast<T*>(ptr_);
  }
  [[nodiscard]] int64_t bytes() const { return bytes_; }

 private:
  void Free();

  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

using DeviceBuffer = CudaMemory<MemoryKind::kDevice>;
using PinnedBuffer = CudaMemory<MemoryKind::kPinnedHost>;

extern template class CudaMemory<MemoryKind::kDevice>;
extern template class CudaMemory<MemoryKind::kPinnedHost>;

}  // namespace pagellm::cuda

#endif  // PAGELLM_WORKER_BACKEND_CUDA_DEVICE_MEMORY_H_
