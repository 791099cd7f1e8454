// DeviceKvPool: the paged KV cache of every layer in one device allocation, and the swap pool in
// pinned host memory, both laid out block-major:
//   [num_blocks][num_layers][K, V][num_kv_heads][block_size][head_dim]
// so one block of every layer is one contiguous range (block_bytes()): copy-on-write is one
// batched kernel for all of a step's copies, and a swap is one cudaMemcpyAsync per block on a
// dedicated copy stream. layer(i) is the kernels/paged_kv.h view of layer i (block_stride =
// 2 * num_layers * block_elems).
//
// Copies are ordered before the next step: CopyKv records an event on the copy stream that the
// compute stream waits for.
//
// Not thread-safe: the engine thread calls everything.
#ifndef PAGELLM_WORKER_BACKEND_CUDA_DEVICE_KV_POOL_H_
#define PAGELLM_WORKER_BACKEND_CUDA_DEVICE_KV_POOL_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/paged_kv.h"
#include "worker/backend/cuda/device_memory.h"
#include "worker/kv/kv_copy.h"

namespace pagellm::cuda {

struct DeviceKvPoolOptions {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  kernels::KvDtype dtype = kernels::KvDtype::kBF16;
  int64_t num_blocks = 0;       // device pool
  int64_t num_swap_blocks = 0;  // pinned host pool; 0: none
};

class DeviceKvPool {
 public:
  // Bytes one block takes across all layers, K and V.
  static int64_t BlockBytes(const DeviceKvPoolOptions& o);
  // Allocates both pools (ResourceExhausted when either does not fit) and the copy stream.
  // `compute` is the stream the forward pass runs on.
  static absl::StatusOr<std::unique_ptr<DeviceKvPool>> Create(const DeviceKvPoolOptions& o,
                                                              cudaStream_t compute);
  ~DeviceKvPool();
  DeviceKvPool(const DeviceKvPool&) = delete;
  DeviceKvPool& operator=(const DeviceKvPool&) = delete;

  const DeviceKvPoolOptions& options() const { return options_; }
  [[nodiscard]] int64_t block_bytes() const { return BlockBytes(options_); }
  [[nodiscard]] kernels::PagedKvLayer layer(int64_t i) const;

  // Executes `copies` in order. Swap-outs must finish before a later copy-on-write or step
  // overwrites their source, and swap-ins before anything reads them, so the copy stream first
  // waits for the compute stream, and the compute stream waits for the copies. InvalidArgument
  // for an id outside its pool (nothing is copied then); Internal for a failed copy.
  absl::Status CopyKv(std::span<const KvCopy> copies);

 private:
  DeviceKvPool(const DeviceKvPoolOptions& o, cudaStream_t compute)
      : options_(o), compute_(compute) {}

  DeviceKvPoolOptions options_;
  cudaStream_t compute_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t compute_done_ = nullptr, copies_done_ = nullptr;
  DeviceBuffer device_;
  PinnedBuffer swap_;
  DeviceBuffer pairs_device_;  // copy-on-write (src, dst) pairs of one batch
  PinnedBuffer pairs_host_;
  int64_t max_pairs_ = 0;
};

}  // namespace pagellm::cuda

#endif  // PAGELLM_WORKER_BACKEND_CUDA_DEVICE_KV_POOL_H_
