// Copy ordering. CopyKv runs a list whose order matters (a swap-out of block b followed by a
// copy-on-write into b). Consecutive copy-on-writes are batched into one kernel launch; a run
// of swaps becomes cudaMemcpyAsync calls. Everything goes on the copy stream in list order,
// after an event from the compute stream (the previous step has finished writing), and the
// compute stream waits for the last copy before the next step.
#include "worker/backend/cuda/device_kv_pool.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/kv_copy.h"

namespace pagellm::cuda {

int64_t DeviceKvPool::BlockBytes(const DeviceKvPoolOptions& o) {
  return 2 * o.num_layers * o.num_kv_heads * o.block_size * o.head_dim *
         kernels::KvDtypeBytes(o.dtype);
}

absl::StatusOr<std::unique_ptr<DeviceKvPool>> DeviceKvPool::Create(const DeviceKvPoolOptions& o,
                                                                   cudaStream_t compute) {
  if (o.num_blocks <= 0 || o.num_swap_blocks < 0 || BlockBytes(o) <= 0) {
    return absl::InvalidArgumentError("a KV pool needs at least one block of a valid shape");
  }
  std::unique_ptr<DeviceKvPool> p(new DeviceKvPool(o, compute));
  const int64_t bb = BlockBytes(o);
  ASSIGN_OR_RETURN(p->device_, DeviceBuffer::Allocate(o.num_blocks * bb, "the KV cache"));
  if (o.num_swap_blocks > 0) {
    ASSIGN_OR_RETURN(p->swap_, PinnedBuffer::Allocate(o.num_swap_blocks * bb, "the swap space"));
  }
  p->max_pairs_ = o.num_blocks;
  ASSIGN_OR_RETURN(p->pairs_device_,
                   DeviceBuffer::Allocate(2 * p->max_pairs_ * sizeof(int32_t), "KV copies"));
  ASSIGN_OR_RETURN(p->pairs_host_,
                   PinnedBuffer::Allocate(2 * p->max_pairs_ * sizeof(int32_t), "KV copies"));
  RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&p->copy_, cudaStreamNonBlocking),
                             "creating the KV copy stream"));
  RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&p->compute_done_, cudaEventDisableTiming),
                             "creating a KV copy event"));
  RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&p->copies_done_, cudaEventDisableTiming),
                             "creating a KV copy event"));
  return p;
}

DeviceKvPool::~DeviceKvPool() {
  if (copy_ != nullptr) {
    cudaStreamSynchronize(copy_);
    cudaStreamDestroy(copy_);
  }
  if (compute_done_ != nullptr) cudaEventDestroy(compute_done_);
  if (copies_done_ != nullptr) cudaEventDestroy(copies_done_);
}

kernels::PagedKvLayer DeviceKvPool::layer(int64_t i) const {
  const DeviceKvPoolOptions& o = options_;
  kernels::PagedKvLayer l;
  l.dtype = o.dtype;
  l.block_size = o.block_size;
  l.num_kv_heads = o.num_kv_heads;
  l.head_dim = o.head_dim;
  const int64_t elems = l.shape().block_elems();
  l.block_stride = 2 * o.num_layers * elems;
  const int64_t eb = kernels::KvDtypeBytes(o.dtype);
  uint8_t* base = device_.as<uint8_t>();
  l.k = base + (2 * i) * elems * eb;
  l.v = base + (2 * i + 1) * elems * eb;
  return l;
}

absl::Status DeviceKvPool::CopyKv(std::span<const KvCopy> copies) {
  if (copies.empty()) return absl::OkStatus();
  const int64_t nd = options_.num_blocks, ns = options_.num_swap_blocks;
  for (const KvCopy& c : copies) {
    const int64_t src_n = c.kind == KvCopy::Kind::kSwapToDevice ? ns : nd;
    const int64_t dst_n = c.kind == KvCopy::Kind::kDeviceToSwap ? ns : nd;
    if (c.src < 0 || c.src >= src_n || c.dst < 0 || c.dst >= dst_n) {
      return absl::InvalidArgumentError(absl::StrCat("KV copy ", c.src, " -> ", c.dst,
                                                     " outside the pools (", nd, " device, ", ns,
                                                     " swap blocks)"));
    }
  }
  const int64_t bb = block_bytes();
  uint8_t* dev = device_.as<uint8_t>();
  uint8_t* host = swap_.as<uint8_t>();
  RETURN_IF_ERROR(CudaStatus(cudaEventRecord(compute_done_, compute_), "ordering KV copies"));
  RETURN_IF_ERROR(CudaStatus(cudaStreamWaitEvent(copy_, compute_done_, 0), "ordering KV copies"));
  // The pinned pair buffer is reused per run of copy-on-writes: wait for the previous run's
  // kernel to have read it.
  int32_t* pairs = pairs_host_.as<int32_t>();
  size_t i = 0;
  while (i < copies.size()) {
    if (copies[i].kind == KvCopy::Kind::kDeviceToDevice) {
      RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(copy_), "KV copy-on-write"));
      int64_t n = 0;
      for (; i < copies.size() && copies[i].kind == KvCopy::Kind::kDeviceToDevice && n < max_pairs_;
           ++i, ++n) {
        pairs[2 * n] = copies[i].src;
        pairs[2 * n + 1] = copies[i].dst;
      }
      RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(pairs_device_.get(), pairs, 2 * n * sizeof(int32_t),
                                     cudaMemcpyHostToDevice, copy_),
                     "KV copy-on-write"));
      RETURN_IF_ERROR(CudaStatus(
          kernels::cuda::LaunchCopyBlocks(dev, bb, pairs_device_.as<int32_t>(), n, copy_),
          "KV copy-on-write"));
      continue;
    }
    const KvCopy& c = copies[i++];
    const bool out = c.kind == KvCopy::Kind::kDeviceToSwap;
    void* dst = out ? static_cast<void*>(host + c.dst * bb) : dev + c.dst * bb;
    const void* src = out ? static_cast<const void*>(dev + c.src * bb) : host + c.src * bb;
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(dst, src, bb, out ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, copy_),
        out ? "KV swap-out" : "KV swap-in"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaEventRecord(copies_done_, copy_), "ordering KV copies"));
  return CudaStatus(cudaStreamWaitEvent(compute_, copies_done_, 0), "ordering KV copies");
}

}  // namespace pagellm::cuda
