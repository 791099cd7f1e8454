// KvCopy: one whole-block KV copy that the block manager's bookkeeping asks the backend to do
// before the next forward pass: copy-on-write inside the device pool, or a swap between the
// device pool and the swap pool (host memory that holds preempted sequences). The one copy type
// of the block manager, the scheduler and the backends.
#ifndef PAGELLM_WORKER_KV_KV_COPY_H_
#define PAGELLM_WORKER_KV_KV_COPY_H_

#include <cstdint>

namespace pagellm {

struct KvCopy {
  // kDeviceToDevice: copy-on-write; kDeviceToSwap: swap-out; kSwapToDevice: swap-in.
  enum class Kind { kDeviceToDevice, kDeviceToSwap, kSwapToDevice };
  Kind kind = Kind::kDeviceToDevice;
  int32_t src = -1;  // block id in the source pool
  int32_t dst = -1;  // block id in the destination pool
  friend bool operator==(const KvCopy&, const KvCopy&) = default;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_KV_KV_COPY_H_
