// Flags every serving tool shares for the paged KV cache and the scheduler: --block-size,
// --num-kv-blocks, --kv-cache-memory, --kv-cache-dtype, --swap-space, --max-num-seqs,
// --max-num-batched-tokens, --max-model-len, --preemption-mode, --[no-]enable-prefix-caching.
#ifndef PAGELLM_TOOLS_CLI_ENGINE_FLAGS_H_
#define PAGELLM_TOOLS_CLI_ENGINE_FLAGS_H_

#include "absl/status/statusor.h"
#include "worker/backend/cpu_backend.h"
#include "worker/engine/engine.h"

namespace pagellm::cli {

// The CPU backend the flags describe (threads from --threads).
CpuBackendOptions BackendOptionsFromFlags();
// The engine options the flags describe. InvalidArgument for an unknown --preemption-mode.
absl::StatusOr<EngineOptions> EngineOptionsFromFlags();

}  // namespace pagellm::cli

#endif  // PAGELLM_TOOLS_CLI_ENGINE_FLAGS_H_
