#include "tools/simulate/contiguous_allocator.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm::sim {
namespace {

class ContiguousAllocatorTest : public ::testing::Test {
 protected:
  int64_t Alloc(int64_t size) {
    auto start = a_.Allocate(size);
    EXPECT_TRUE(start.ok()) << start.status();
    return start.value_or(-1);
  }
  void ExpectFree(int64_t free, int64_t largest) {
    EXPECT_EQ(a_.free(), free);
    EXPECT_EQ(a_.used(), a_.capacity() - free);
    EXPECT_EQ(a_.LargestFreeExtent(), largest);
    EXPECT_EQ(a_.ExternalFragmentation(), free - largest);
  }
  ContiguousAllocator a_{100};
};

TEST_F(ContiguousAllocatorTest, FirstFitPacksFromTheStart) {
  EXPECT_EQ(Alloc(30), 0);
  EXPECT_EQ(Alloc(30), 30);
  EXPECT_EQ(Alloc(30), 60);
  ExpectFree(10, 10);
}

TEST_F(ContiguousAllocatorTest, HolesAreExternalFragmentation) {
  const int64_t a = Alloc(30), b = Alloc(30);
  Alloc(30);
  ASSERT_TRUE(a_.Free(b).ok());
  ExpectFree(40, 30);  // [30, 60) and [90, 100): the 10-slot tail is external fragmentation
  EXPECT_EQ(a_.num_free_extents(), 2);
  // 40 slots are free but no 35-slot extent: refused, and nothing changes.
  EXPECT_EQ(a_.Allocate(35).status().code(), absl::StatusCode::kResourceExhausted);
  ExpectFree(40, 30);
  EXPECT_EQ(Alloc(20), 30);  // first fit: the hole, not the tail
  ExpectFree(20, 10);        // [50, 60) and [90, 100)
  ASSERT_TRUE(a_.Free(a).ok());
  ExpectFree(50, 30);
}

TEST_F(ContiguousAllocatorTest, FreeMergesBothNeighbours) {
  const int64_t a = Alloc(30), b = Alloc(30), c = Alloc(30);
  ASSERT_TRUE(a_.Free(a).ok());
  ASSERT_TRUE(a_.Free(c).ok());
  EXPECT_EQ(a_.num_free_extents(), 2);
  ASSERT_TRUE(a_.Free(b).ok());
  EXPECT_EQ(a_.num_free_extents(), 1);
  ExpectFree(100, 100);
  EXPECT_EQ(Alloc(100), 0);
}

TEST_F(ContiguousAllocatorTest, BadCalls) {
  EXPECT_EQ(a_.Allocate(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a_.Allocate(101).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a_.Free(5).code(), absl::StatusCode::kNotFound);
  const int64_t a = Alloc(10);
  ASSERT_TRUE(a_.Free(a).ok());
  EXPECT_EQ(a_.Free(a).code(), absl::StatusCode::kNotFound);  // double free
}

// Random operations against a slot-by-slot reference: same first-fit addresses, same accounting.
TEST(ContiguousAllocatorFuzzTest, MatchesASlotMapReference) {
  constexpr int64_t kCapacity = 500;
  ContiguousAllocator a(kCapacity);
  std::vector<bool> used(kCapacity, false);
  std::map<int64_t, int64_t> live;  // start -> size
  std::mt19937 rng(11);
  for (int op = 0; op < 20000; ++op) {
    if (live.empty() || rng() % 2 == 0) {
      const int64_t size = 1 + rng() % 80;
      int64_t expect = -1;
      for (int64_t s = 0, run = 0; s < kCapacity; ++s) {
        run = used[s] ? 0 : run + 1;
        if (run == size) {
          expect = s - size + 1;
          break;
        }
      }
      auto got = a.Allocate(size);
      if (expect < 0) {
        ASSERT_FALSE(got.ok());
      } else {
        ASSERT_TRUE(got.ok());
        ASSERT_EQ(*got, expect);
        for (int64_t s = expect; s < expect + size; ++s) used[s] = true;
        live[expect] = size;
      }
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE(a.Free(it->first).ok());
      for (int64_t s = it->first; s < it->first + it->second; ++s) used[s] = false;
      live.erase(it);
    }
    int64_t free = 0, largest = 0;
    for (int64_t s = 0, run = 0; s < kCapacity; ++s) {
      run = used[s] ? 0 : run + 1;
      free += used[s] ? 0 : 1;
      largest = std::max(largest, run);
    }
    ASSERT_EQ(a.free(), free);
    ASSERT_EQ(a.LargestFreeExtent(), largest);
    ASSERT_EQ(a.ExternalFragmentation(), free - largest);
    ASSERT_EQ(a.num_allocations(), static_cast<int64_t>(live.size()));
  }
}

}  // namespace
}  // namespace pagellm::sim
