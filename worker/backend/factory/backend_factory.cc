#include "worker/backend/factory/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagellm {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    const BackendOptions& options, std::shared_ptr<const ModelCheckpoint> checkpoint) {
  if (options.device == "mock") {
    MockBackendOptions mock = options.mock;
    for (const LoraModuleSpec& m : options.lora_modules) mock.adapter_names.push_back(m.name);
    return CreateMockBackend(mock);
  }
  if (options.device != "cpu" && options.device != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown device '", options.device, "' (cpu, cuda)"));
  }
  if (checkpoint == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--device ", options.device, " needs a model"));
  }
  std::vector<std::shared_ptr<const LoraAdapter>> adapters;
  LoraLoadOptions lo;
  lo.max_rank = options.max_lora_rank;
  for (const LoraModuleSpec& m : options.lora_modules) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<LoraAdapter> adapter,
        LoadLoraAdapter(m.name, m.path, checkpoint->config, checkpoint->rope_neox, lo));
    adapters.push_back(std::move(adapter));
  }
  if (options.device == "cuda") {
    CudaBackendOptions cuda = options.cuda;
    cuda.lora_adapters = std::move(adapters);
    return CreateCudaBackend(std::move(checkpoint), cuda);
  }
  CpuBackendOptions cpu = options.cpu;
  cpu.lora_adapters = std::move(adapters);
  return CreateCpuBackend(std::move(checkpoint), cpu);
}

}  // namespace pagellm
