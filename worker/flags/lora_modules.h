// --lora-modules: the LoRA adapters a worker serves beside its model, in vLLM's `name=path`
// spelling, comma-separated (absl's list flags): `--lora-modules sql=/adapters/sql,chat=/a/chat`.
// A request runs an adapter by naming it (the OpenAI API's "model"). Names must be unique,
// 1..128 bytes of [A-Za-z0-9._:/-] (they appear in /v1/models, URLs and metric labels); at most
// kMaxLoraModules adapters; paths non-empty. InvalidArgument naming the entry otherwise.
#ifndef PAGELLM_WORKER_FLAGS_LORA_MODULES_H_
#define PAGELLM_WORKER_FLAGS_LORA_MODULES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/lora_adapter.h"

namespace pagellm::cli {

inline constexpr int kMaxLoraModules = 64;

absl::StatusOr<std::vector<LoraModuleSpec>> ParseLoraModules(
    const std::vector<std::string>& entries);

}  // namespace pagellm::cli

#endif  // PAGELLM_WORKER_FLAGS_LORA_MODULES_H_
