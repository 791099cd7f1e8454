#include "worker/flags/open_from_flags.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/backend/factory/backend_factory.h"
#include "worker/flags/engine_flags.h"
#include "worker/flags/model_flags.h"
#include "worker/flags/parallel_flags.h"

namespace pagellm::cli {

absl::StatusOr<OpenedModel> OpenModelFromFlags(const std::string& generation_config_dir) {
  ASSIGN_OR_RETURN(BackendOptions bo, BackendOptionsFromFlags());
  if (TensorParallelSizeFromFlags() > 1 && bo.device != "cpu" && bo.device != "cuda") {
    return absl::UnimplementedError(
        absl::StrCat("--tensor-parallel-size runs on --device cpu or cuda, not ", bo.device));
  }
  // A tensor-parallel group starts first, so that the other ranks load while this one does.
  ASSIGN_OR_RETURN(ParallelGroup group, JoinGroupFromFlags());
  OpenedModel m;
  std::shared_ptr<const ModelCheckpoint> checkpoint;
  if (bo.device == "mock") {
    // No model: the serving layers alone (see worker/backend/mock/mock_backend.h).
    ASSIGN_OR_RETURN(m.tokenizer, MockTokenizer());
    m.model_name = "mock";
  } else {
    LoadModelOptions lo = ModelOptionsFromFlags();
    // The CUDA backend generates dummy weights on the device (16 GB made on the host would take
    // minutes only to be copied over).
    lo.dummy_generated_by_backend = bo.device == "cuda";
    lo.generation_config_dir = generation_config_dir;
    if (lo.path.empty() && lo.format != "dummy") {
      return absl::InvalidArgumentError("--model is required");
    }
    ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(lo));
    m.tokenizer = std::move(loaded.tokenizer);
    m.chat_template = std::move(loaded.chat_template);
    m.chat_tokens = std::move(loaded.chat_tokens);
    m.generation_config = std::move(loaded.generation_config);
    checkpoint = std::move(loaded.checkpoint);
    m.model_name = lo.path.empty() ? lo.format : std::filesystem::path(lo.path).filename().string();
  }
  m.lora_loader = MakeLoraLoader(bo, checkpoint.get());
  ASSIGN_OR_RETURN(m.backend, CreateBackendInGroup(bo, std::move(checkpoint), std::move(group)));
  return m;
}

}  // namespace pagellm::cli
