// Tensor parallelism on the command line of every worker-side tool (pagellm-worker, pagellm
// generate, pagellm-bench), with vLLM's flag name:
//   --tensor-parallel-size N        N ranks, one process each. Alone, the process is rank 0 and
//                                   starts ranks 1..N-1 itself on this host (the same binary and
//                                   flags, plus --rank and --dist-init), and they die with it.
//   --rank R --dist-init HOST:PORT  joins a group whose ranks were started elsewhere (one per
//                                   pod): rank 0 serves the rendezvous at HOST:PORT, the others
//                                   connect to it.
//   --dist-host ADDR                where this rank's collective connections listen (default
//                                   127.0.0.1; a pod's own address across hosts).
//   --dist-timeout SECONDS          bound on joining and on every collective (60).
// Each rank's --threads defaults to the machine's cores divided among the ranks on it.
#ifndef PAGELLM_WORKER_FLAGS_PARALLEL_FLAGS_H_
#define PAGELLM_WORKER_FLAGS_PARALLEL_FLAGS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/factory/backend_factory.h"
#include "worker/dist/communicator.h"
#include "worker/dist/rendezvous.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace pagellm::cli {

// --tensor-parallel-size (>= 1).
int TensorParallelSizeFromFlags();

// This process's place in its group: rank 0 is the leader, whose tool goes on as usual;
// followers only serve rank 0's steps.
struct ParallelGroup {
  std::unique_ptr<Communicator> comm;
  int rank = 0;
  int world_size = 1;
  // The rank's index among the ranks this host's leader started (its GPU is --gpu-id plus this),
  // or -1 for a rank that joined by --dist-init from elsewhere (its GPU is --gpu-id).
  int local_rank = 0;
  // The group's rendezvous (rank 0 serves it), kept until the backend is made: a GPU group
  // passes NCCL's unique id through it. Null for a group of one.
  std::unique_ptr<RendezvousServer> rendezvous;
  std::shared_ptr<gloo::rendezvous::Store> store;
};

// Starts or joins the group the flags describe (a group of one when --tensor-parallel-size is
// 1). Rank 0 without --dist-init starts the other ranks as child processes. InvalidArgument for
// inconsistent flags; the communicator's errors (DeadlineExceeded when a rank does not join in
// time).
absl::StatusOr<ParallelGroup> JoinGroupFromFlags();

// The backend `options` describe over `checkpoint`, for this process's place in `group`: the
// plain backend for a group of one; on rank 0 the group as one backend (the communicator moves
// into it); on any other rank this never returns -- the process serves rank 0's steps and exits
// (status 0 when rank 0 stopped the group, 1 on an error). options.cpu.threads 0 becomes the
// cores divided among the group's ranks. On --device cuda each rank takes GPU --gpu-id plus its
// local rank and joins an NCCL communicator for the model's collectives (the group's host
// communicator carries the steps); Unimplemented in a build without CUDA or on the mock device.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackendInGroup(
    BackendOptions options, std::shared_ptr<const ModelCheckpoint> checkpoint, ParallelGroup group);

}  // namespace pagellm::cli

#endif  // PAGELLM_WORKER_FLAGS_PARALLEL_FLAGS_H_
