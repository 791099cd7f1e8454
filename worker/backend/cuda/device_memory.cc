#include "worker/backend/cuda/device_memory.h"

#include "absl/strings/str_cat.h"

namespace pagellm::cuda {

absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg =
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

template <MemoryKind KIND>
absl::StatusOr<CudaMemory<KIND>> CudaMemory<KIND>::Allocate(int64_t bytes, absl::string_view what) {
  CudaMemory m;
  if (bytes <= 0) return m;
  constexpr bool kDevice = KIND == MemoryKind::kDevice;
  const cudaError_t err =
      kDevice ? cudaMalloc(&m.ptr_, static_cast<size_t>(bytes))
              : cudaHostAlloc(&m.ptr_, static_cast<size_t>(bytes), cudaHostAllocDefault);
  if (err != cudaSuccess) {
    m.ptr_ = nullptr;
    cudaGetLastError();  // clear the non-sticky allocation error
    return CudaStatus(err, absl::StrCat("allocating ", bytes >> 20, " MiB of ",
                                        kDevice ? "device" : "pinned host", " memory for ", what));
  }
  m.bytes_ = bytes;
  return m;
}

template <MemoryKind KIND>
void CudaMemory<KIND>::Free() {
  if (ptr_ == nullptr) return;
  if constexpr (KIND == MemoryKind::kDevice) {
    cudaFree(ptr_);
  } else {
    cudaFreeHost(ptr_);
  }
  ptr_ = nullptr;
}

template class CudaMemory<MemoryKind::kDevice>;
template class CudaMemory<MemoryKind::kPinnedHost>;

}  // namespace pagellm::cuda
