// A tensor-parallel group as one Backend (issue 12). Rank 0 -- the leader -- owns the engine; its
// Backend is MakeTensorParallelLeader(), which sends every call (forward batch, KV copies) to the
// followers before running it on its own slice, so that all ranks run the same steps in the same
// order and meet in the model's all-reduces. Each follower runs RunTensorParallelFollower() over
// its own slice until the leader stops the group.
//
// Sampling happens on the leader only (every rank ends a step with the same logits); followers
// compute the step and drop its logits.
//
// Liveness: while the engine is idle the leader sends a heartbeat every `heartbeat` (from its own
// thread, between steps), so a follower waiting for the next step hears from a live leader well
// within the communicator's timeout. A follower or leader that dies closes its connections: the
// others' next collective fails at once (Unavailable), or at the latest after the timeout. From
// then on every call fails with that error -- the engine fails the requests of each step -- and
// health() reports it, so the worker stops taking requests.
//
// At start the ranks compare their KV pool sizes, step size and block size (an all-gather):
// FailedPrecondition if they differ, since block ids must mean the same on every rank.
#ifndef PAGELLM_WORKER_BACKEND_TP_TENSOR_PARALLEL_BACKEND_H_
#define PAGELLM_WORKER_BACKEND_TP_TENSOR_PARALLEL_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/backend/backend.h"
#include "worker/dist/communicator.h"
#include "worker/model/lora_adapter.h"

namespace pagellm {

struct TensorParallelOptions {
  absl::Duration heartbeat = absl::Seconds(1);
};

// The leader's Backend over `rank0` (rank 0's slice). Steps travel over `comm`; the model's
// collectives use `comm` too, or `model_comm` when given (a GPU group's NCCL beside the host
// communicator). Takes all three: the communicators outlive the backend that borrows them.
// Destroying the result stops the followers. Errors: the start-up comparison's (see the file
// comment) or the communicator's.
absl::StatusOr<std::unique_ptr<Backend>> MakeTensorParallelLeader(
    std::unique_ptr<Backend> rank0, std::unique_ptr<Communicator> comm,
    const TensorParallelOptions& options = {}, std::unique_ptr<Communicator> model_comm = nullptr);

// Serves the leader's steps on a follower rank with `backend` (this rank's slice, whose model
// collectives use `comm`). `load_adapter` reads the adapters the leader loads while serving
// (runtime LoRA updating; empty: such a change fails on this rank, and so in the group). Returns
// OK when the leader stops the group; the error otherwise (a failed collective, a step the
// backend refused). Blocks the calling thread.
absl::Status RunTensorParallelFollower(Backend* backend, Communicator* comm,
                                       const LoraLoader& load_adapter = {});

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_TP_TENSOR_PARALLEL_BACKEND_H_
