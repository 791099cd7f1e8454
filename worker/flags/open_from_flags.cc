#include "worker/flags/open_from_flags.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/backend/factory/backend_factory.h"
#include "worker/backend/tp/tensor_parallel_backend.h"
#include "worker/flags/engine_flags.h"
#include "worker/flags/model_flags.h"
#include "worker/flags/parallel_flags.h"

namespace pagellm::cli {

absl::StatusOr<OpenedModel> OpenModelFromFlags() {
  ASSIGN_OR_RETURN(BackendOptions bo, BackendOptionsFromFlags());
  // A tensor-parallel group starts first, so that the other ranks load while this one does.
  const int tp = TensorParallelSizeFromFlags();
  if (tp > 1 && bo.device != "cpu") {
    return absl::UnimplementedError(absl::StrCat("--tensor-parallel-size ", tp,
                                                 " runs on --device cpu only for now (", bo.device,
                                                 " needs its own communicator)"));
  }
  ASSIGN_OR_RETURN(ParallelGroup group, JoinGroupFromFlags());
  if (tp > 1) {
    bo.cpu.shard = {.rank = group.rank, .world_size = group.world_size};
    bo.cpu.communicator = group.comm.get();
    if (ThreadsFromFlags() == 0) {
      bo.cpu.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / tp);
    }
  }
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
    if (lo.path.empty() && lo.format != "dummy") {
      return absl::InvalidArgumentError("--model is required");
    }
    ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(lo));
    m.tokenizer = std::move(loaded.tokenizer);
    m.chat_template = std::move(loaded.chat_template);
    checkpoint = std::move(loaded.checkpoint);
    m.model_name = lo.path.empty() ? lo.format : std::filesystem::path(lo.path).filename().string();
  }
  ASSIGN_OR_RETURN(m.backend, CreateBackend(bo, std::move(checkpoint)));
  if (tp == 1) return m;
  if (group.rank > 0) {
    const absl::Status s = RunTensorParallelFollower(m.backend.get(), group.comm.get());
    m.backend.reset();  // before the communicator it borrows
    if (!s.ok()) PLOG_ERROR("tensor-parallel rank {}: {}", group.rank, s.ToString());
    std::exit(s.ok() ? 0 : 1);
  }
  ASSIGN_OR_RETURN(m.backend,
                   MakeTensorParallelLeader(std::move(m.backend), std::move(group.comm)));
  return m;
}

}  // namespace pagellm::cli
