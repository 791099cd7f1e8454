// What the model and backend flags describe, opened: the tokenizer and a backend over the model
// (or the mock backend for --load-format mock). Shared by pagellm-worker, pagellm generate and
// pagellm-bench.
#ifndef PAGELLM_WORKER_FLAGS_OPEN_FROM_FLAGS_H_
#define PAGELLM_WORKER_FLAGS_OPEN_FROM_FLAGS_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/tokenizer/special_tokens.h"
#include "common/tokenizer/tokenizer.h"
#include "worker/backend/backend.h"
#include "worker/backend/factory/backend_factory.h"

namespace pagellm::cli {

struct OpenedModel {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  std::string chat_template;      // "" when the model has none
  SpecialTokenTexts chat_tokens;  // the special tokens the template sees
  std::string model_name;         // the model file or directory's name ("mock", "dummy")
  LoraLoader lora_loader;         // reads adapters for this model (runtime LoRA updating)
  // The checkpoint's generation_config.json (LoadedModel::generation_config).
  std::optional<std::string> generation_config;
};

// InvalidArgument without --model (unless dummy or mock); the loader's and the backend's errors
// otherwise (FailedPrecondition for --device cuda without a GPU).
//
// With --tensor-parallel-size N > 1 (parallel_flags.h), rank 0 returns the group as one backend;
// on any other rank this never returns: the process serves rank 0's steps and exits (status 0
// when rank 0 stopped the group, 1 on an error).
//
// `generation_config_dir`: LoadModelOptions::generation_config_dir (pagellm-worker
// --generation-config DIR); "" for the model's own files.
absl::StatusOr<OpenedModel> OpenModelFromFlags(const std::string& generation_config_dir = "");

}  // namespace pagellm::cli

#endif  // PAGELLM_WORKER_FLAGS_OPEN_FROM_FLAGS_H_
