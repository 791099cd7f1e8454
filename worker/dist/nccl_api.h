// NCCL, loaded at first use with dlopen rather than linked (libnccl.so.2): worker binaries start on
// machines without it (nccl_api.cc). Builds over the CPU emulator of CUDA link the emulator's
// entry points instead (nccl_linked.cc; kernels/cuda/emu/nccl.cc).
//
// Thread-safe: the library is loaded once.
#ifndef PAGELLM_WORKER_DIST_NCCL_API_H_
#define PAGELLM_WORKER_DIST_NCCL_API_H_

#include <nccl.h>

#include "absl/status/statusor.h"

namespace pagellm {

// The NCCL entry points the communicator uses.
struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) init_rank = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclCommGetAsyncError) async_error = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
};

// The loaded API. FailedPrecondition naming the library and dlerror() when it cannot be loaded or
// lacks an entry point; the same answer on every call.
absl::StatusOr<const NcclApi*> LoadNccl();

}  // namespace pagellm

#endif  // PAGELLM_WORKER_DIST_NCCL_API_H_
