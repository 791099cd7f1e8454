// Flags every serving tool shares for the backend, the paged KV cache and the scheduler:
// --device, --dtype, --block-size, --num-kv-blocks, --kv-cache-memory, --kv-cache-dtype,
// --swap-space, --max-num-seqs, --max-num-batched-tokens, --long-prefill-token-threshold,
// --max-model-len, --preemption-mode, --scheduling-policy,
// --[no-]enable-prefix-caching, --speculative-config, --enable-lora, --lora-modules,
// --max-lora-rank, --max-loras, --max-cpu-loras, --mock-step-delay-us.
#ifndef PAGELLM_WORKER_FLAGS_ENGINE_FLAGS_H_
#define PAGELLM_WORKER_FLAGS_ENGINE_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "worker/backend/factory/backend_factory.h"
#include "worker/engine/engine.h"

namespace pagellm::cli {

// The backend the flags describe (--load-format mock selects the mock backend). InvalidArgument
// for a --dtype the device does not compute in.
absl::StatusOr<BackendOptions> BackendOptionsFromFlags();
// --allow-runtime-lora-updating (adapter slots beyond --lora-modules: --max-loras).
bool AllowRuntimeLoraUpdatingFromFlags();
// --max-num-batched-tokens, or its default for `device` when 0: 256 for "cpu" (a step's latency
// is what every running stream waits for; a 2048-token chunk takes seconds on a CPU), 2048
// otherwise (vLLM's default for its API server).
int64_t MaxNumBatchedTokensFromFlags(const std::string& device);
// The engine options the flags describe. InvalidArgument for an unknown --preemption-mode or
// --scheduling-policy, a --speculative-config pagellm does not serve, or a --max-cpu-loras
// below --max-loras.
absl::StatusOr<EngineOptions> EngineOptionsFromFlags();

}  // namespace pagellm::cli

#endif  // PAGELLM_WORKER_FLAGS_ENGINE_FLAGS_H_
