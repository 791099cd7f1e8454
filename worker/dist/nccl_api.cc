#include "worker/dist/nccl_api.h"

#include "common/shared_library.h"

namespace pagellm {
namespace {

absl::StatusOr<NcclApi> Load() {
  absl::StatusOr<SharedLibrary> lib = SharedLibrary::Open({"libnccl.so.2", "libnccl.so"}, "NCCL",
                                                          "put libnccl.so.2 on LD_LIBRARY_PATH");
  if (!lib.ok()) return lib.status();
  NcclApi api;
  for (absl::Status s :
       {lib->Get(&api.get_unique_id, "ncclGetUniqueId"),
        lib->Get(&api.init_rank, "ncclCommInitRank"), lib->Get(&api.destroy, "ncclCommDestroy"),
        lib->Get(&api.abort, "ncclCommAbort"), lib->Get(&api.async_error, "ncclCommGetAsyncError"),
        lib->Get(&api.error_string, "ncclGetErrorString"),
        lib->Get(&api.all_reduce, "ncclAllReduce"), lib->Get(&api.all_gather, "ncclAllGather"),
        lib->Get(&api.broadcast, "ncclBroadcast"), lib->Get(&api.send, "ncclSend"),
        lib->Get(&api.recv, "ncclRecv"), lib->Get(&api.group_start, "ncclGroupStart"),
        lib->Get(&api.group_end, "ncclGroupEnd")}) {
    if (!s.ok()) return s;
  }
  return api;  // the library stays loaded for the process's life
}

}  // namespace

absl::StatusOr<const NcclApi*> LoadNccl() {
  static const absl::StatusOr<NcclApi>* const loaded = new absl::StatusOr<NcclApi>(Load());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

}  // namespace pagellm
