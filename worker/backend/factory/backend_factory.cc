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
  if (options.device == "cuda") {
    if (!options.lora_modules.empty()) {
      return absl::UnimplementedError(
          "LoRA adapters (--lora-modules) are served on --device cpu; the CUDA backend does not "
          "apply them yet");
    }
    return CreateCudaBackend(std::move(checkpoint), options.cuda);
  }
  CpuBackendOptions cpu = options.cpu;
  LoraLoadOptions lo;
  lo.max_rank = options.max_lora_rank;
  for (const LoraModuleSpec& m : options.lora_modules) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<LoraAdapter> adapter,
        LoadLoraAdapter(m.name, m.path, checkpoint->config, checkpoint->rope_neox, lo));
    cpu.lora_adapters.push_back(std::move(adapter));
  }
  return CreateCpuBackend(std::move(checkpoint), cpu);
}

}  // namespace pagellm
