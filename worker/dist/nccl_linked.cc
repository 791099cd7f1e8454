// LoadNccl() over NCCL entry points linked into the binary instead of loaded with dlopen: in
// builds and tests over the CUDA emulator, whose runtime library defines them
// (kernels/cuda/emu/nccl.cc).
#include "worker/dist/nccl_api.h"

namespace pagellm {

absl::StatusOr<const NcclApi*> LoadNccl() {
  static const NcclApi api{.get_unique_id = &ncclGetUniqueId,
                           .init_rank = &ncclCommInitRank,
                           .destroy = &ncclCommDestroy,
                           .abort = &ncclCommAbort,
                           .async_error = &ncclCommGetAsyncError,
                           .error_string = &ncclGetErrorString,
                           .all_reduce = &ncclAllReduce,
                           .all_gather = &ncclAllGather,
                           .broadcast = &ncclBroadcast,
                           .send = &ncclSend,
                           .recv = &ncclRecv,
                           .group_start = &ncclGroupStart,
                           .group_end = &ncclGroupEnd};
  return &api;
}

}  // namespace pagellm
