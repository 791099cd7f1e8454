// Invariant: a block is in `free_` exactly when its reference count is zero; each id appears in
// `free_` at most once. Violations are bugs in the caller and abort with the offending id.
#include "worker/kv/block_allocator.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace pagellm {

BlockAllocator::BlockAllocator(int32_t num_blocks) : ref_counts_(num_blocks, 0) {
  free_.reserve(num_blocks);
  for (int32_t i = num_blocks - 1; i >= 0; --i) free_.push_back(i);
}

absl::StatusOr<int32_t> BlockAllocator::Allocate() {
  if (free_.empty()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no free KV block (pool of ", num_blocks(), " blocks)"));
  }
  const int32_t block = free_.back();
  free_.pop_back();
  ref_counts_[block] = 1;
  return block;
}

void BlockAllocator::AddRef(int32_t block) {
  PAGELLM_CHECK(block >= 0 && block < num_blocks() && ref_counts_[block] > 0,
                "AddRef on block {} that is not allocated", block);
  ++ref_counts_[block];
}

void BlockAllocator::Release(int32_t block) {
  PAGELLM_CHECK(block >= 0 && block < num_blocks() && ref_counts_[block] > 0,
                "Release of block {} that is not allocated (double free?)", block);
  if (--ref_counts_[block] == 0) free_.push_back(block);
}

}  // namespace pagellm
