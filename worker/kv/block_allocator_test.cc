#include "worker/kv/block_allocator.h"

#include <random>
#include <set>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

TEST(BlockAllocatorTest, AllocatesEveryBlockOnceThenReportsExhaustion) {
  BlockAllocator a(4);
  std::set<int32_t> got;
  for (int i = 0; i < 4; ++i) {
    auto b = a.Allocate();
    ASSERT_TRUE(b.ok());
    EXPECT_TRUE(got.insert(*b).second);
    EXPECT_EQ(a.num_free(), 3 - i);
  }
  auto none = a.Allocate();
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(BlockAllocatorTest, SharedBlockIsFreedWithItsLastReference) {
  BlockAllocator a(2);
  int32_t b = *a.Allocate();
  a.AddRef(b);
  EXPECT_EQ(a.ref_count(b), 2);
  a.Release(b);
  EXPECT_EQ(a.num_free(), 1);
  a.Release(b);
  EXPECT_EQ(a.num_free(), 2);
  EXPECT_EQ(a.ref_count(b), 0);
}

TEST(BlockAllocatorTest, RandomOperationsKeepAccounting) {
  BlockAllocator a(16);
  std::mt19937 rng(1);
  std::vector<int32_t> held;  // one entry per reference
  for (int step = 0; step < 5000; ++step) {
    int op = rng() % 3;
    if (op == 0) {
      auto b = a.Allocate();
      if (b.ok()) held.push_back(*b);
    } else if (op == 1 && !held.empty()) {
      int32_t b = held[rng() % held.size()];
      a.AddRef(b);
      held.push_back(b);
    } else if (!held.empty()) {
      size_t i = rng() % held.size();
      a.Release(held[i]);
      held.erase(held.begin() + i);
    }
    std::set<int32_t> distinct(held.begin(), held.end());
    ASSERT_EQ(a.num_free(), 16 - static_cast<int32_t>(distinct.size()));
    for (int32_t b : distinct) {
      ASSERT_EQ(a.ref_count(b), std::count(held.begin(), held.end(), b));
    }
  }
  for (int32_t b : held) a.Release(b);
  EXPECT_EQ(a.num_free(), 16);
}

TEST(BlockAllocatorDeathTest, DoubleFreeAborts) {
  BlockAllocator a(1);
  int32_t b = *a.Allocate();
  a.Release(b);
  EXPECT_DEATH(a.Release(b), "double free");
}

}  // namespace
}  // namespace pagellm
