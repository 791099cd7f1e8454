// Invariant: the free extents and the allocated extents tile [0, capacity) exactly; no two free
// extents touch (Free merges them), so every free extent is bounded by allocations or the ends.
#include "tools/simulate/contiguous_allocator.h"

#include <algorithm>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace pagellm::sim {

ContiguousAllocator::ContiguousAllocator(int64_t capacity) : capacity_(capacity) {
  PAGELLM_CHECK(capacity > 0, "contiguous allocator capacity {} must be > 0", capacity);
  free_[0] = capacity;
}

absl::StatusOr<int64_t> ContiguousAllocator::Allocate(int64_t size) {
  if (size <= 0) return absl::InvalidArgumentError(absl::StrCat("allocation of ", size));
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const int64_t start = it->first;
    const int64_t rest = it->second - size;
    free_.erase(it);
    if (rest > 0) free_[start + size] = rest;
    allocated_[start] = size;
    used_ += size;
    return start;
  }
  return absl::ResourceExhaustedError(absl::StrCat("no free extent of ", size, " slots (", free(),
                                                   " free, largest ", LargestFreeExtent(), ")"));
}

absl::Status ContiguousAllocator::Free(int64_t start) {
  auto a = allocated_.find(start);
  if (a == allocated_.end()) return absl::NotFoundError(absl::StrCat("no extent at ", start));
  int64_t begin = start;
  int64_t end = start + a->second;
  used_ -= a->second;
  allocated_.erase(a);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == end) {
    end += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      free_.erase(prev);
    }
  }
  free_[begin] = end - begin;
  return absl::OkStatus();
}

int64_t ContiguousAllocator::LargestFreeExtent() const {
  int64_t largest = 0;
  for (const auto& [start, size] : free_) largest = std::max(largest, size);
  return largest;
}

}  // namespace pagellm::sim
