#include "worker/backend/factory/backend_factory.h"

#include "absl/strings/str_cat.h"

namespace pagellm {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    const BackendOptions& options, std::shared_ptr<const ModelCheckpoint> checkpoint) {
  if (options.device == "mock") return CreateMockBackend(options.mock);
  if (options.device != "cpu" && options.device != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown device '", options.device, "' (cpu, cuda)"));
  }
  if (checkpoint == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--device ", options.device, " needs a model"));
  }
  if (options.device == "cuda") return CreateCudaBackend(std::move(checkpoint), options.cuda);
  return CreateCpuBackend(std::move(checkpoint), options.cpu);
}

}  // namespace pagellm
