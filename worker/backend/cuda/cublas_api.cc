#include "worker/backend/cuda/cublas_api.h"

#include "common/shared_library.h"

namespace pagellm::cuda {
namespace {

absl::StatusOr<CublasApi> Load() {
  absl::StatusOr<SharedLibrary> lib = SharedLibrary::Open(
      {"libcublas.so.13", "libcublas.so"}, "cuBLAS", "put CUDA's libraries on LD_LIBRARY_PATH");
  if (!lib.ok()) return lib.status();
  CublasApi api;
  for (absl::Status s :
       {lib->Get(&api.create, "cublasCreate_v2"), lib->Get(&api.destroy, "cublasDestroy_v2"),
        lib->Get(&api.set_stream, "cublasSetStream_v2"),
        lib->Get(&api.set_workspace, "cublasSetWorkspace_v2"),
        lib->Get(&api.gemm_ex, "cublasGemmEx"), lib->Get(&api.status_name, "cublasGetStatusName"),
        lib->Get(&api.status_string, "cublasGetStatusString")}) {
    if (!s.ok()) return s;
  }
  return api;  // the library stays loaded for the process's life
}

}  // namespace

absl::StatusOr<const CublasApi*> LoadCublas() {
  static const absl::StatusOr<CublasApi>* const loaded = new absl::StatusOr<CublasApi>(Load());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

}  // namespace pagellm::cuda
