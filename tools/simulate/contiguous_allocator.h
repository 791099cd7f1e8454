// ContiguousAllocator: first-fit allocation of contiguous extents in a linear space of KV token
// slots, the way systems before PagedAttention (Orca, FasterTransformer) keep each request's KV
// cache in one contiguous tensor. Freed extents merge with free neighbours; what remains
// scattered between live extents is external fragmentation.
//
// Not thread-safe; plain value semantics (copyable).
#ifndef PAGELLM_TOOLS_SIMULATE_CONTIGUOUS_ALLOCATOR_H_
#define PAGELLM_TOOLS_SIMULATE_CONTIGUOUS_ALLOCATOR_H_

#include <cstdint>
#include <map>

#include "absl/status/statusor.h"

namespace pagellm::sim {

class ContiguousAllocator {
 public:
  // REQUIRES: capacity > 0.
  explicit ContiguousAllocator(int64_t capacity);

  // Reserves `size` slots at the lowest address where a free extent fits; returns its start.
  // InvalidArgument for size <= 0; ResourceExhausted when no free extent is large enough (even
  // if the free total is: that is external fragmentation). Unchanged on error.
  absl::StatusOr<int64_t> Allocate(int64_t size);
  // Releases the extent that Allocate returned at `start`. NotFound if there is none.
  absl::Status Free(int64_t start);

  [[nodiscard]] int64_t capacity() const { return capacity_; }
  [[nodiscard]] int64_t used() const { return used_; }
  [[nodiscard]] int64_t free() const { return capacity_ - used_; }
  // The largest single request that Allocate would accept now.
  [[nodiscard]] int64_t LargestFreeExtent() const;
  // Free slots outside the largest free extent: free() - LargestFreeExtent().
  [[nodiscard]] int64_t ExternalFragmentation() const { return free() - LargestFreeExtent(); }
  [[nodiscard]] int64_t num_free_extents() const { return static_cast<int64_t>(free_.size()); }
  [[nodiscard]] int64_t num_allocations() const { return static_cast<int64_t>(allocated_.size()); }

 private:
  int64_t capacity_;
  int64_t used_ = 0;
  std::map<int64_t, int64_t> free_;       // start -> size; disjoint, never adjacent
  std::map<int64_t, int64_t> allocated_;  // start -> size
};

}  // namespace pagellm::sim

#endif  // PAGELLM_TOOLS_SIMULATE_CONTIGUOUS_ALLOCATOR_H_
