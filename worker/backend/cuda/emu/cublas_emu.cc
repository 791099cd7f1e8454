// LoadCublas() for the CPU emulator (kernels/cuda/emu): the cuBLAS entry points the backend uses,
// computed on the host in the calling order of their stream (recorded while it is captured).
// cublasGemmEx as its documentation defines it -- column-major, C = alpha op(A) op(B) + beta C
// with fp32 accumulation over bf16, fp16 or fp32 operands -- for CUBLAS_COMPUTE_32F only, the one
// compute type the backend asks for; anything else is CUBLAS_STATUS_NOT_SUPPORTED. Test-only.
#include <algorithm>
#include <vector>

#include "kernels/cuda/emu/cuda_emu.h"  // first: it defines the CUDA qualifiers
#include "worker/backend/cuda/cublas_api.h"

namespace pagellm::cuda {
namespace {

struct Handle {
  cudaStream_t stream = nullptr;
};

cublasStatus_t Create(cublasHandle_t* handle) {
  *handle = reinterpret_cast<cublasHandle_t>(new Handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t Destroy(cublasHandle_t handle) {
  delete reinterpret_cast<Handle*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t SetStream(cublasHandle_t handle, cudaStream_t stream) {
  reinterpret_cast<Handle*>(handle)->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t SetWorkspace(cublasHandle_t, void*, size_t) { return CUBLAS_STATUS_SUCCESS; }

bool Supported(cudaDataType t) { return t == CUDA_R_16BF || t == CUDA_R_16F || t == CUDA_R_32F; }

cuda_emu::Element Of(cudaDataType t) {
  return t == CUDA_R_16BF  ? cuda_emu::Element::kBF16
         : t == CUDA_R_16F ? cuda_emu::Element::kF16
                           : cuda_emu::Element::kF32;
}

float Read(const void* p, cudaDataType t, size_t i) { return cuda_emu::ReadElement(p, Of(t), i); }

void Write(void* p, cudaDataType t, size_t i, float v) { cuda_emu::WriteElement(p, Of(t), i, v); }

cublasStatus_t GemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                      int m, int n, int k, const void* alpha, const void* a, cudaDataType atype,
                      int lda, const void* b, cudaDataType btype, int ldb, const void* beta,
                      void* c, cudaDataType ctype, int ldc, cublasComputeType_t compute,
                      cublasGemmAlgo_t) {
  if (compute != CUBLAS_COMPUTE_32F || !Supported(atype) || !Supported(btype) ||
      !Supported(ctype) || (transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) ||
      (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  if (m < 0 || n < 0 || k < 0 || lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) ||
      ldc < std::max(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const cudaError_t e = cuda_emu::Enqueue(reinterpret_cast<Handle*>(handle)->stream, [=] {
    // op(A) as k-contiguous rows of m, op(B) as k-contiguous columns of n, in fp32.
    std::vector<float> ar(static_cast<size_t>(m) * k), bc(static_cast<size_t>(n) * k);
    for (int i = 0; i < m; ++i) {
      for (int l = 0; l < k; ++l) {
        ar[static_cast<size_t>(i) * k + l] = Read(
            a, atype, ta ? l + static_cast<size_t>(i) * lda : i + static_cast<size_t>(l) * lda);
      }
    }
    for (int j = 0; j < n; ++j) {
      for (int l = 0; l < k; ++l) {
        bc[static_cast<size_t>(j) * k + l] = Read(
            b, btype, tb ? j + static_cast<size_t>(l) * ldb : l + static_cast<size_t>(j) * ldb);
      }
    }
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        float acc = 0.0f;
        const float* x = ar.data() + static_cast<size_t>(i) * k;
        const float* y = bc.data() + static_cast<size_t>(j) * k;
        for (int l = 0; l < k; ++l) acc += x[l] * y[l];
        const size_t at = i + static_cast<size_t>(j) * ldc;
        Write(c, ctype, at, be == 0.0f ? al * acc : al * acc + be * Read(c, ctype, at));
      }
    }
    return cudaSuccess;
  });
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

const char* StatusName(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_ERROR (cuda_emu)";
}

const char* StatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "success (cuda_emu)" : "error (cuda_emu)";
}

}  // namespace

absl::StatusOr<const CublasApi*> LoadCublas() {
  static const CublasApi api = [] {
    CublasApi a;
    a.create = Create;
    a.destroy = Destroy;
    a.set_stream = SetStream;
    a.set_workspace = SetWorkspace;
    a.gemm_ex = GemmEx;
    a.status_name = StatusName;
    a.status_string = StatusString;
    return a;
  }();
  return &api;
}

}  // namespace pagellm::cuda
