// A DeviceCommunicator over NCCL for GPU ranks, one process per GPU (issue 12). Its buffers are
// device memory of this rank's GPU: the inherited collectives are enqueued on the communicator's
// stream and waited for, so on return the result is in place; the Enqueue* ones go on the
// forward pass's stream (device_communicator.h). A group's
// step messages (BroadcastBytes) travel over a host communicator (Gloo) beside it, as vLLM keeps
// a CPU group for metadata; BroadcastBytes here would read a host size as a device pointer, so
// this class refuses host-side use by contract, not by check.
//
// NCCL is loaded with dlopen (libnccl.so.2) when a group connects, so worker binaries start
// without it. NCCL's calls do not time out: each wait polls the stream and NCCL's asynchronous
// error, and when the communicator's timeout runs out it aborts the communicator
// (DeadlineExceeded; a peer's failure is Unavailable) -- the group is then broken, as
// communicator.h says. Joining (ncclCommInitRank) is bounded by the rendezvous: a rank that never
// publishes or reads the unique id times out there.
//
// Built only where nvcc exists (PAGELLM_HAVE_CUDA). Not thread-safe.
#ifndef PAGELLM_WORKER_DIST_NCCL_COMMUNICATOR_H_
#define PAGELLM_WORKER_DIST_NCCL_COMMUNICATOR_H_

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/dist/device_communicator.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace pagellm {

struct NcclOptions {
  int rank = 0;
  int world_size = 1;
  int device = 0;  // this rank's GPU
  absl::Duration timeout = absl::Seconds(60);
};

// Joins the group: rank 0 makes NCCL's unique id and publishes it in `store`, the others read
// it, and every rank initializes its communicator on `device` (which becomes the calling
// thread's current device). The waiting collectives run on `stream` (borrowed; it must outlive
// the communicator), or, when it is null, on a non-blocking stream the communicator makes and
// owns. FailedPrecondition "no CUDA device found" without a GPU, and when NCCL cannot be loaded
// or the device cannot be selected; InvalidArgument for a rank outside the group or a device
// beyond the GPUs there are; the store's and NCCL's errors otherwise.
absl::StatusOr<std::unique_ptr<DeviceCommunicator>> ConnectNccl(const NcclOptions& options,
                                                                gloo::rendezvous::Store& store,
                                                                cudaStream_t stream = nullptr);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_DIST_NCCL_COMMUNICATOR_H_
