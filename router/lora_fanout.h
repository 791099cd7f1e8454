// ChangeWorkerAdapters: a runtime LoRA change (router/http/openai_request.h's
// LoraChangeRequest: load or unload) sent to every ready worker at once (Worker.LoadLoraAdapter /
// UnloadLoraAdapter), as vLLM's /v1/load_lora_adapter does for its one engine.
//
// Each worker that applied the change answers with the adapters it serves now; the pool takes
// that list at once (WorkerPool::SetAdapters), so a request naming a just-loaded adapter is routed
// to the workers that have it without waiting for their next poll. Workers differ afterwards only
// where the change failed on some of them (the outcome says which), and the pool routes each
// adapter's requests to the workers that serve it. A worker that starts later (or restarts)
// serves its --lora-modules; the router then loads on it what every other ready worker loaded at
// run time (WorkerPool::TakeAdapterReplays, ChangeAdaptersOn), where a vLLM replica restarted
// behind a load balancer serves its start-up adapters only.
//
// Thread-safe; returns at once; `done` runs once, on a gRPC thread (or this one when no worker
// is ready), and must not block.
#ifndef PAGELLM_ROUTER_LORA_FANOUT_H_
#define PAGELLM_ROUTER_LORA_FANOUT_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "router/http/openai_request.h"
#include "router/worker_pool.h"

namespace pagellm {

// The outcome: OK when every ready worker applied the change; Unavailable when none is ready;
// otherwise the first failure's code, its message prefixed with how many workers refused (and
// for a load, how many have it now).
void ChangeWorkerAdapters(WorkerPool* pool, const LoraChangeRequest& change, absl::Duration timeout,
                          std::function<void(absl::Status)> done);
// The same, on `workers` only (Unavailable when empty).
void ChangeAdaptersOn(WorkerPool* pool, const std::vector<std::shared_ptr<WorkerEndpoint>>& workers,
                      const LoraChangeRequest& change, absl::Duration timeout,
                      std::function<void(absl::Status)> done);

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_LORA_FANOUT_H_
