// cuBLAS, loaded at first use with dlopen rather than linked: a worker binary then starts on a
// machine without the CUDA libraries (--device cpu), and cuBLAS's large thread-local storage
// (~94 KiB in libcublasLt) becomes dynamic TLS instead of a static block that every later thread
// must fit in its stack (civetweb, under the metrics endpoint, creates 100 KiB stacks and fails
// to start beside a linked cuBLAS).
//
// Thread-safe: the library is loaded once.
#ifndef PAGELLM_WORKER_BACKEND_CUDA_CUBLAS_API_H_
#define PAGELLM_WORKER_BACKEND_CUDA_CUBLAS_API_H_

#include <cublas_v2.h>

#include "absl/status/statusor.h"

namespace pagellm::cuda {

// The cuBLAS entry points the backend uses.
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  // cublasGemmEx has a C++ overload (cublasComputeType_t vs. cudaDataType): name the C one.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The loaded API (libcublas.so.13, then libcublas.so, on the loader's search path).
// FailedPrecondition naming the library and dlerror() when it cannot be loaded or lacks an entry
// point; the same answer on every call.
absl::StatusOr<const CublasApi*> LoadCublas();

}  // namespace pagellm::cuda

#endif  // PAGELLM_WORKER_BACKEND_CUDA_CUBLAS_API_H_
