#include "worker/backend/factory/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagellm {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    const BackendOptions& options, std::shared_ptr<const ModelCheckpoint> checkpoint) {
  if (options.device == "mock") {
    MockBackendOptions mock = options.mock;
    for (const LoraModuleSpec& m : options.lora_modules) mock.adapter_names.push_back(m.name);
    mock.max_loras = options.max_loras;
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
  const LoraLoader load = MakeLoraLoader(options, checkpoint.get());
  for (const LoraModuleSpec& m : options.lora_modules) {
    ASSIGN_OR_RETURN(std::shared_ptr<const LoraAdapter> adapter, load(m));
    adapters.push_back(std::move(adapter));
  }
  if (options.device == "cuda") {
    CudaBackendOptions cuda = options.cuda;
    cuda.lora_adapters = std::move(adapters);
    cuda.max_loras = options.max_loras;
    cuda.max_lora_rank = options.max_lora_rank;
    return CreateCudaBackend(std::move(checkpoint), cuda);
  }
  CpuBackendOptions cpu = options.cpu;
  cpu.lora_adapters = std::move(adapters);
  cpu.max_loras = options.max_loras;
  return CreateCpuBackend(std::move(checkpoint), cpu);
}

LoraLoader MakeLoraLoader(const BackendOptions& options, const ModelCheckpoint* checkpoint) {
  if (options.device == "mock" || checkpoint == nullptr) {
    return [](const LoraModuleSpec& m) -> absl::StatusOr<std::shared_ptr<const LoraAdapter>> {
      auto adapter = std::make_shared<LoraAdapter>();
      adapter->name = m.name;
      adapter->path = m.path;
      return adapter;
    };
  }
  LoraLoadOptions lo;
  lo.max_rank = options.max_lora_rank;
  return [config = checkpoint->config, neox = checkpoint->rope_neox,
          lo](const LoraModuleSpec& m) -> absl::StatusOr<std::shared_ptr<const LoraAdapter>> {
    ASSIGN_OR_RETURN(std::unique_ptr<LoraAdapter> adapter,
                     LoadLoraAdapter(m.name, m.path, config, neox, lo));
    return std::shared_ptr<const LoraAdapter>(std::move(adapter));
  };
}

}  // namespace pagellm
