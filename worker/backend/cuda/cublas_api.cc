#include "worker/backend/cuda/cublas_api.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace pagellm::cuda {
namespace {

absl::StatusOr<CublasApi> Load() {
  void* lib = nullptr;
  std::string errors;
  for (const char* name : {"libcublas.so.13", "libcublas.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", dlerror());
  }
  if (lib == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load cuBLAS (", errors, "); put CUDA's libraries on LD_LIBRARY_PATH"));
  }
  CublasApi api;
  auto get = [&](auto& fn, const char* symbol) -> absl::Status {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
    if (fn == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("cuBLAS has no ", symbol));
    }
    return absl::OkStatus();
  };
  for (absl::Status s :
       {get(api.create, "cublasCreate_v2"), get(api.destroy, "cublasDestroy_v2"),
        get(api.set_stream, "cublasSetStream_v2"), get(api.set_workspace, "cublasSetWorkspace_v2"),
        get(api.gemm_ex, "cublasGemmEx"), get(api.status_name, "cublasGetStatusName"),
        get(api.status_string, "cublasGetStatusString")}) {
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
