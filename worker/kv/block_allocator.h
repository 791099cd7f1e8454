// BlockAllocator: the free list and reference counts of a pool of KV blocks.
//
// A block id is an index into the pool's storage. A block is free when its reference count is
// zero. Sharing (forked sequences, prefix reuse) adds references; a block returns to the free
// list when its last reference is dropped. Queries are const and separate from mutations.
//
// Not thread-safe: owned by the single engine thread.
#ifndef PAGELLM_WORKER_KV_BLOCK_ALLOCATOR_H_
#define PAGELLM_WORKER_KV_BLOCK_ALLOCATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace pagellm {

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  [[nodiscard]] int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  [[nodiscard]] int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  [[nodiscard]] int32_t ref_count(int32_t block) const { return ref_counts_.at(block); }

  // Takes a free block with reference count 1. ResourceExhausted when none is free.
  absl::StatusOr<int32_t> Allocate();
  // Adds a reference. REQUIRES: the block is allocated.
  void AddRef(int32_t block);
  // Drops a reference; the block is free again when the count reaches zero.
  // REQUIRES: the block is allocated.
  void Release(int32_t block);

 private:
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_;  // LIFO: recently freed blocks are reused first (warm in cache)
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_KV_BLOCK_ALLOCATOR_H_
