// DeviceCommunicator: a Communicator whose buffers are device memory, with collectives that can
// also be enqueued on a GPU stream without waiting (issue 12). A tensor-parallel forward pass
// enqueues its all-reduces between its kernels -- in stream order, capturable in a CUDA graph --
// and waits once, at the end of the step, with WaitStream.
//
// Contract, beyond communicator.h's:
//   - Every buffer is device memory of this rank's GPU; the inherited (waiting) collectives run on
//     the communicator's own stream, the Enqueue* ones on the stream given.
//   - Enqueue* only enqueue: the result is in place for work enqueued after it on that stream.
//     They fail only when the group is already broken or the library refuses the call.
//   - WaitStream(stream) returns once everything enqueued on `stream` so far has finished, within
//     the communicator's timeout: DeadlineExceeded after it (the communicator is then aborted, so
//     the stream cannot hang the process later), Unavailable when a peer failed. Either breaks the
//     group, as communicator.h says. A step's collectives are waited for only through this.
//
// `stream` is a cudaStream_t passed as void*, so this header needs no CUDA headers (the engine side
// that holds one includes it).
//
// Not thread-safe: one thread makes every call.
#ifndef PAGELLM_WORKER_DIST_DEVICE_COMMUNICATOR_H_
#define PAGELLM_WORKER_DIST_DEVICE_COMMUNICATOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "worker/dist/communicator.h"

namespace pagellm {

// Element types of the enqueued collectives (the model's compute types and fp32).
enum class CollectiveDtype { kF32, kF16, kBF16 };

class DeviceCommunicator : public Communicator {
 public:
  // data[0, n) becomes the element-wise sum over the ranks, in stream order.
  virtual absl::Status EnqueueAllReduceSum(void* data, int64_t n, CollectiveDtype dtype,
                                           void* stream) = 0;

  // out[r * n, (r + 1) * n) gets rank r's in[0, n), in stream order. REQUIRES: out holds
  // world_size() * n elements and does not overlap in.
  virtual absl::Status EnqueueAllGather(const void* in, int64_t n, CollectiveDtype dtype, void* out,
                                        void* stream) = 0;

  // Waits for `stream` as the file comment says. Not counted in collective_seconds(): the wait
  // covers the step's kernels as well as its collectives.
  virtual absl::Status WaitStream(void* stream) = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_DIST_DEVICE_COMMUNICATOR_H_
