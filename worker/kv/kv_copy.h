// KvCopy: one whole-block KV copy that the block manager's bookkeeping asks the backend to do
// before a forward pass: copy-on-write inside the device pool, or a swap between the device pool
// and the host (CPU) swap pool.
#ifndef PAGELLM_WORKER_KV_KV_COPY_H_
#define PAGELLM_WORKER_KV_KV_COPY_H_

#include <cstdint>

namespace pagellm {

struct KvCopy {
  enum class Kind { kDeviceToDevice, kDeviceToHost, kHostToDevice };
  Kind kind = Kind::kDeviceToDevice;
  int32_t src = -1;  // block id in the source pool
  int32_t dst = -1;  // block id in the destination pool
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_KV_KV_COPY_H_
