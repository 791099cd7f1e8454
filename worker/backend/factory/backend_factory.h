// CreateBackend: the backend a worker or a tool asks for by name.
//
//   "cpu"   the CPU backend over a checkpoint (the default);
//   "mock"  no model and no arithmetic, a byte vocabulary: for measuring the serving layers;
//   "cuda"  the CUDA backend on one GPU (FailedPrecondition "no CUDA device found" without one;
//           the options and the checkpoint's upload plan are validated first).
#ifndef PAGELLM_WORKER_BACKEND_FACTORY_BACKEND_FACTORY_H_
#define PAGELLM_WORKER_BACKEND_FACTORY_BACKEND_FACTORY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/mock/mock_backend.h"
#include "worker/model/lora_adapter.h"
#include "worker/model/model_checkpoint.h"

namespace pagellm {

struct BackendOptions {
  std::string device = "cpu";  // cpu | cuda | mock
  CpuBackendOptions cpu;
  CudaBackendOptions cuda;
  MockBackendOptions mock;
  // LoRA adapters served beside the model (--lora-modules), read here for the cpu and cuda
  // devices (each must fit the checkpoint; rank at most max_lora_rank); the mock device takes
  // their names only.
  std::vector<LoraModuleSpec> lora_modules;
  int64_t max_lora_rank = 16;
  // Adapter slots (--max-loras with --allow-runtime-lora-updating): those lora_modules do not
  // fill take adapters loaded while serving (Backend::SetAdapter). Fewer than lora_modules
  // (0 by default): exactly those.
  int64_t max_loras = 0;
};

// The backend `options.device` names. `checkpoint` is required for cpu and cuda and ignored for
// mock. InvalidArgument for an unknown device or a missing checkpoint; otherwise the errors of
// the backend's own Create (for cuda: FailedPrecondition without a GPU).
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    const BackendOptions& options, std::shared_ptr<const ModelCheckpoint> checkpoint);

// Reads a LoRA adapter for a backend CreateBackend built from the same options and checkpoint,
// as it reads --lora-modules: InvalidArgument (or Unimplemented, NotFound) when the directory
// is not an adapter that fits the model. The mock device's loader takes the name and path only.
// Keeps the checkpoint's configuration, not its tensors. Thread-safe.
LoraLoader MakeLoraLoader(const BackendOptions& options, const ModelCheckpoint* checkpoint);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_FACTORY_BACKEND_FACTORY_H_
