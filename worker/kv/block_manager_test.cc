#include "worker/kv/block_manager.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "common/prefix_cache/block_hash.h"
#include "common/prefix_cache/prefix_filter.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

std::vector<int32_t> Tokens(int n, int32_t first = 100) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = first + i;
  return t;
}

class BlockManagerTest : public ::testing::Test {
 protected:
  // One-line setup; the defaults keep the accounting easy to follow by hand.
  void Make(int32_t device, int32_t cpu = 0, int32_t block_size = 4, double watermark = 0.0,
            bool prefix_caching = false) {
    BlockManager::Options o;
    o.num_device_blocks = device;
    o.num_swap_blocks = cpu;
    o.block_size = block_size;
    o.watermark = watermark;
    o.enable_prefix_caching = prefix_caching;
    auto m = BlockManager::Create(o);
    ASSERT_TRUE(m.ok()) << m.status();
    m_ = std::move(*m);
    num_device_ = device;
    num_cpu_ = cpu;
  }
  // Allocates and, like the engine after the prompt's forward pass, marks the prompt computed.
  int64_t Alloc(int64_t id, const std::vector<int32_t>& prompt) {
    auto hit = m_->Allocate(id, prompt);
    EXPECT_TRUE(hit.ok()) << hit.status();
    live_.insert(id);
    EXPECT_TRUE(m_->MarkComputed(id, static_cast<int64_t>(prompt.size())).ok());
    return hit.ok() ? *hit : -1;
  }
  std::vector<KvCopy> Append(int64_t id, int32_t token = 7) {
    std::vector<KvCopy> copies;
    EXPECT_TRUE(m_->AppendSlot(id, token, &copies).ok());
    return copies;
  }
  void Free(int64_t id) {
    EXPECT_TRUE(m_->Free(id).ok());
    live_.erase(id);
  }
  int32_t FreeDevice() const { return m_->NumFreeDeviceBlocks(); }
  int32_t Ref(int64_t id, int i) const { return m_->TEST_DeviceRefCount(m_->BlockTable(id)[i]); }

  // Every reference count equals the references held by live tables plus the cache's hold; a
  // block is free exactly when nothing refers to it; tables cover their tokens.
  void CheckInvariants() const {
    std::vector<int32_t> dev(num_device_, 0), cpu(num_cpu_, 0), table_refs(num_device_, 0);
    for (int64_t id : live_) {
      const auto& table = m_->BlockTable(id);
      ASSERT_EQ(static_cast<int64_t>(table.size()),
                (m_->NumTokens(id) + m_->block_size() - 1) / m_->block_size());
      for (int32_t b : table) {
        if (m_->IsSwapped(id)) {
          ++cpu.at(b);
        } else {
          ++dev.at(b);
          ++table_refs.at(b);
        }
      }
    }
    const std::vector<int32_t> cached = m_->TEST_CachedBlocks();
    int32_t evictable = 0;
    for (int32_t b : cached) {
      ++dev.at(b);
      if (table_refs[b] == 0) ++evictable;
    }
    int32_t dev_zero = 0, cpu_zero = 0;
    for (int32_t b = 0; b < num_device_; ++b) {
      ASSERT_EQ(m_->TEST_DeviceRefCount(b), dev[b]) << "device block " << b;
      dev_zero += dev[b] == 0;
    }
    for (int32_t b = 0; b < num_cpu_; ++b) {
      ASSERT_EQ(m_->TEST_SwapRefCount(b), cpu[b]) << "cpu block " << b;
      cpu_zero += cpu[b] == 0;
    }
    ASSERT_EQ(m_->TEST_NumUnreferencedDeviceBlocks(), dev_zero);
    const BlockManager::Stats s = m_->GetStats();
    ASSERT_EQ(s.device_free, dev_zero + evictable);
    ASSERT_EQ(s.device_used + s.device_free, num_device_);
    ASSERT_EQ(s.device_cached, static_cast<int32_t>(cached.size()));
    ASSERT_EQ(s.device_cached_evictable, evictable);
    ASSERT_EQ(s.swap_free, cpu_zero);
    ASSERT_EQ(s.swap_used + s.swap_free, num_cpu_);
  }

  std::unique_ptr<BlockManager> m_;
  std::set<int64_t> live_;
  int32_t num_device_ = 0;
  int32_t num_cpu_ = 0;
};

TEST_F(BlockManagerTest, CreateRejectsImpossibleOptions) {
  BlockManager::Options o;
  EXPECT_EQ(BlockManager::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.num_device_blocks = 4;
  o.watermark = 1.0;
  EXPECT_EQ(BlockManager::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BlockManagerTest, AllocateAndFreeKeepAccountingAfterEveryOperation) {
  Make(/*device=*/8);
  EXPECT_EQ(Alloc(1, Tokens(10)), 0);
  EXPECT_EQ(m_->BlockTable(1).size(), 3u);
  EXPECT_EQ(FreeDevice(), 5);
  CheckInvariants();
  Alloc(2, Tokens(5));
  EXPECT_EQ(FreeDevice(), 3);
  CheckInvariants();
  // Too large: refused with a status, nothing changes.
  EXPECT_EQ(m_->Allocate(3, Tokens(13)).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(m_->HasSequence(3));
  EXPECT_EQ(FreeDevice(), 3);
  EXPECT_EQ(m_->Allocate(2, Tokens(1)).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(m_->Allocate(4, {}).status().code(), absl::StatusCode::kInvalidArgument);
  Free(1);
  EXPECT_EQ(FreeDevice(), 6);
  CheckInvariants();
  Free(2);
  EXPECT_EQ(FreeDevice(), 8);
  EXPECT_EQ(m_->Free(2).code(), absl::StatusCode::kNotFound);
  CheckInvariants();
}

TEST_F(BlockManagerTest, WatermarkKeepsBlocksFreeForRunningSequences) {
  Make(/*device=*/100, 0, /*block_size=*/16, /*watermark=*/0.1);
  EXPECT_TRUE(m_->CanAllocate(90 * 16));
  EXPECT_FALSE(m_->CanAllocate(90 * 16 + 1));
  EXPECT_FALSE(m_->CanAllocate(0));
  Alloc(1, Tokens(90 * 16));
  EXPECT_FALSE(m_->CanAllocate(1));
  const int64_t ids[] = {1};
  EXPECT_TRUE(m_->CanAppendSlots(ids));  // the watermark is there for exactly this
  Append(1);
  EXPECT_EQ(FreeDevice(), 9);
  CheckInvariants();
}

TEST_F(BlockManagerTest, AppendTakesNewBlockOnlyWhenLastIsFull) {
  Make(/*device=*/4);
  Alloc(1, Tokens(4));
  EXPECT_EQ(m_->BlockTable(1).size(), 1u);
  EXPECT_TRUE(Append(1).empty());
  EXPECT_EQ(m_->BlockTable(1).size(), 2u);
  EXPECT_EQ(FreeDevice(), 2);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Append(1).empty());
  EXPECT_EQ(m_->BlockTable(1).size(), 2u);
  EXPECT_EQ(m_->NumTokens(1), 8);
  Append(1);
  EXPECT_EQ(m_->BlockTable(1).size(), 3u);
  CheckInvariants();
  while (m_->NumTokens(1) < 16) Append(1);  // fills the pool's last block
  EXPECT_EQ(FreeDevice(), 0);
  std::vector<KvCopy> copies;
  EXPECT_EQ(m_->AppendSlot(1, 7, &copies).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m_->NumTokens(1), 16);
  CheckInvariants();
}

TEST_F(BlockManagerTest, TruncateGivesBackTheSlotsOfRejectedTokens) {
  Make(/*device=*/8, 0, /*block_size=*/4, 0.0, /*prefix_caching=*/true);
  Alloc(1, Tokens(6));                    // blocks 0-1, the first cached
  for (int i = 0; i < 5; ++i) Append(1);  // 11 tokens: 3 blocks
  EXPECT_EQ(FreeDevice(), 5);
  ASSERT_TRUE(m_->Truncate(1, 8).ok());  // the third block held only cut tokens
  EXPECT_EQ(m_->NumTokens(1), 8);
  EXPECT_EQ(m_->BlockTable(1).size(), 2u);
  EXPECT_EQ(FreeDevice(), 6);
  ASSERT_TRUE(m_->Truncate(1, 7).ok());  // a partial block stays
  EXPECT_EQ(m_->BlockTable(1).size(), 2u);
  CheckInvariants();
  // The slots come back in order: the next append fills position 7 of block 1.
  EXPECT_TRUE(Append(1, 42).empty());
  EXPECT_EQ(m_->NumTokens(1), 8);
  EXPECT_EQ(m_->BlockTable(1).size(), 2u);
  // Never into a block the prefix cache holds, nor past the ends; unchanged on error.
  EXPECT_EQ(m_->Truncate(1, 3).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m_->Truncate(1, 9).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m_->Truncate(1, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m_->Truncate(2, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m_->NumTokens(1), 8);
  ASSERT_TRUE(m_->Truncate(1, 4).ok());
  EXPECT_EQ(FreeDevice(), 7);
  CheckInvariants();
  Free(1);
  CheckInvariants();
}

TEST_F(BlockManagerTest, ForkSharesBlocksAndCopyOnWriteEmitsOneCopy) {
  Make(/*device=*/8);
  Alloc(1, Tokens(6));  // one full block, one partial
  ASSERT_TRUE(m_->Fork(1, 2).ok());
  live_.insert(2);
  EXPECT_EQ(m_->BlockTable(2), m_->BlockTable(1));
  EXPECT_EQ(Ref(1, 0), 2);
  EXPECT_EQ(Ref(1, 1), 2);
  EXPECT_EQ(FreeDevice(), 6);
  CheckInvariants();
  const int32_t shared_last = m_->BlockTable(1)[1];
  const std::vector<KvCopy> copies = Append(2);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, shared_last);
  EXPECT_EQ(copies[0].dst, m_->BlockTable(2)[1]);
  EXPECT_NE(copies[0].dst, shared_last);
  EXPECT_EQ(m_->BlockTable(2)[0], m_->BlockTable(1)[0]);
  EXPECT_EQ(Ref(1, 0), 2);
  EXPECT_EQ(Ref(1, 1), 1);
  EXPECT_EQ(Ref(2, 1), 1);
  CheckInvariants();
  EXPECT_TRUE(Append(1).empty());  // the parent now owns its last block alone
  EXPECT_EQ(m_->BlockTable(1)[1], shared_last);
  CheckInvariants();
  EXPECT_EQ(m_->Fork(1, 2).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(m_->Fork(9, 3).code(), absl::StatusCode::kNotFound);
  Free(1);
  Free(2);
  EXPECT_EQ(FreeDevice(), 8);
  CheckInvariants();
}

TEST_F(BlockManagerTest, SwapOutAndInCopySharedBlocksOnceAndRestoreTables) {
  Make(/*device=*/8, /*cpu=*/8);
  Alloc(1, Tokens(6));
  ASSERT_TRUE(m_->Fork(1, 2).ok());
  live_.insert(2);
  Append(2);  // tables {a, b} and {a, c}
  const auto before1 = m_->BlockTable(1), before2 = m_->BlockTable(2);
  const int64_t group[] = {1, 2};
  EXPECT_TRUE(m_->CanSwapOut(group));
  EXPECT_FALSE(m_->CanSwapIn(group));
  auto out = m_->SwapOut(group);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  std::map<int32_t, int32_t> dev_to_cpu;
  for (const KvCopy& c : *out) EXPECT_TRUE(dev_to_cpu.emplace(c.src, c.dst).second);
  EXPECT_TRUE(m_->IsSwapped(1) && m_->IsSwapped(2));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(m_->BlockTable(1)[i], dev_to_cpu.at(before1[i]));
    EXPECT_EQ(m_->BlockTable(2)[i], dev_to_cpu.at(before2[i]));
  }
  EXPECT_EQ(m_->TEST_SwapRefCount(m_->BlockTable(1)[0]), 2);
  EXPECT_EQ(FreeDevice(), 8);
  EXPECT_EQ(m_->NumFreeSwapBlocks(), 5);
  CheckInvariants();
  std::vector<KvCopy> ignored;
  EXPECT_EQ(m_->AppendSlot(1, 7, &ignored).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m_->SwapOut(group).status().code(), absl::StatusCode::kFailedPrecondition);

  const auto cpu1 = m_->BlockTable(1), cpu2 = m_->BlockTable(2);
  auto in = m_->SwapIn(group);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_EQ(in->size(), 3u);
  std::map<int32_t, int32_t> cpu_to_dev;
  for (const KvCopy& c : *in) EXPECT_TRUE(cpu_to_dev.emplace(c.src, c.dst).second);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(m_->BlockTable(1)[i], cpu_to_dev.at(cpu1[i]));
    EXPECT_EQ(m_->BlockTable(2)[i], cpu_to_dev.at(cpu2[i]));
  }
  EXPECT_EQ(m_->BlockTable(1)[0], m_->BlockTable(2)[0]);
  EXPECT_EQ(Ref(1, 0), 2);
  EXPECT_EQ(m_->NumTokens(2), 7);
  EXPECT_EQ(m_->NumFreeSwapBlocks(), 8);
  CheckInvariants();
}

TEST_F(BlockManagerTest, SwapOutIsRefusedWhenCpuPoolIsShort) {
  Make(/*device=*/8, /*cpu=*/2);
  Alloc(1, Tokens(9));  // 3 blocks
  const int64_t group[] = {1};
  EXPECT_FALSE(m_->CanSwapOut(group));
  EXPECT_EQ(m_->SwapOut(group).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(m_->IsSwapped(1));
  CheckInvariants();
}

TEST_F(BlockManagerTest, PrefixCacheHitsFullBlocksButNeverTheWholePrompt) {
  Make(/*device=*/16, 0, /*block_size=*/4, 0.0, /*prefix_caching=*/true);
  const std::vector<int32_t> prompt = Tokens(10);
  EXPECT_EQ(Alloc(1, prompt), 0);
  CheckInvariants();
  EXPECT_EQ(Alloc(2, prompt), 8);  // two full blocks; the partial third is computed
  EXPECT_EQ(m_->BlockTable(2)[0], m_->BlockTable(1)[0]);
  EXPECT_EQ(m_->BlockTable(2)[1], m_->BlockTable(1)[1]);
  EXPECT_NE(m_->BlockTable(2)[2], m_->BlockTable(1)[2]);
  EXPECT_EQ(Ref(1, 0), 3);  // two tables + the cache
  CheckInvariants();
  // A prompt of exactly two cached blocks reuses only the first: its last token is computed.
  EXPECT_EQ(Alloc(3, Tokens(8)), 4);
  EXPECT_NE(m_->BlockTable(3)[1], m_->BlockTable(1)[1]);
  // A different first block breaks the chain even if later blocks match.
  std::vector<int32_t> other = prompt;
  other[0] = 1;
  EXPECT_EQ(Alloc(4, other), 0);
  CheckInvariants();
  const BlockManager::Stats s = m_->GetStats();
  EXPECT_EQ(s.prefix_cache_hit_tokens, 12);
  EXPECT_EQ(s.prefix_cache_queried_tokens, 38);
}

TEST_F(BlockManagerTest, AllocationCanSkipTheCachedPrefixAndStillFeedTheCache) {
  Make(/*device=*/16, 0, /*block_size=*/4, 0.0, /*prefix_caching=*/true);
  const std::vector<int32_t> prompt = Tokens(10);
  Alloc(1, prompt);
  ASSERT_TRUE(m_->MarkComputed(1, 10).ok());
  // A request that needs every prompt position computed (prompt logprobs) gets fresh blocks.
  ASSERT_EQ(*m_->Allocate(2, prompt, /*reuse_cached_prefix=*/false), 0);
  live_.insert(2);
  for (int i = 0; i < 3; ++i) EXPECT_NE(m_->BlockTable(2)[i], m_->BlockTable(1)[i]);
  EXPECT_EQ(m_->GetStats().prefix_cache_queried_tokens, 10);  // not a lookup that missed
  CheckInvariants();
  // Once computed, the same content stays cached once; later requests still hit it.
  ASSERT_TRUE(m_->MarkComputed(2, 10).ok());
  EXPECT_EQ(m_->TEST_CachedBlocks().size(), 2u);
  Free(1);
  EXPECT_EQ(Alloc(3, prompt), 8);
  CheckInvariants();
}

TEST_F(BlockManagerTest, CacheNamespacesNeverShareBlocks) {
  // A LoRA adapter's KV for the same tokens differs from the base model's: namespace 0 (the base)
  // and 1, 2 (two adapters) each keep their own chain.
  Make(/*device=*/32, 0, /*block_size=*/4, 0.0, /*prefix_caching=*/true);
  const std::vector<int32_t> prompt = Tokens(10);
  auto alloc = [&](int64_t id, uint64_t ns) {
    auto hit = m_->Allocate(id, prompt, true, ns);
    EXPECT_TRUE(hit.ok()) << hit.status();
    live_.insert(id);
    EXPECT_TRUE(m_->MarkComputed(id, 10).ok());
    return hit.ok() ? *hit : -1;
  };
  EXPECT_EQ(alloc(1, 0), 0);
  EXPECT_EQ(alloc(2, 1), 0);  // the base's blocks are not the adapter's
  EXPECT_EQ(alloc(3, 2), 0);
  EXPECT_EQ(alloc(4, 1), 8);  // the same adapter shares its own
  EXPECT_EQ(m_->BlockTable(4)[0], m_->BlockTable(2)[0]);
  EXPECT_NE(m_->BlockTable(2)[0], m_->BlockTable(1)[0]);
  EXPECT_EQ(alloc(5, 0), 8);
  EXPECT_EQ(m_->BlockTable(5)[1], m_->BlockTable(1)[1]);
  // A fork keeps its namespace: its blocks, once full, feed the same chain.
  ASSERT_TRUE(m_->Fork(2, 6).ok());
  live_.insert(6);
  EXPECT_EQ(m_->TEST_CachedBlocks().size(), 6u);  // two full blocks in each of three chains
  CheckInvariants();
}

TEST_F(BlockManagerTest, BlocksJoinThePrefixCacheOnlyOnceComputed) {
  Make(/*device=*/16, 0, /*block_size=*/4, 0.0, /*prefix_caching=*/true);
  const std::vector<int32_t> prompt = Tokens(13);
  ASSERT_EQ(*m_->Allocate(1, prompt), 0);
  live_.insert(1);
  EXPECT_TRUE(m_->TEST_CachedBlocks().empty());  // nothing computed yet: nothing to share
  ASSERT_TRUE(m_->MarkComputed(1, 5).ok());      // a first prefill chunk: one full block
  EXPECT_EQ(m_->TEST_CachedBlocks().size(), 1u);
  EXPECT_EQ(Alloc(2, prompt), 4);  // only the computed block is reused
  ASSERT_TRUE(m_->MarkComputed(1, 13).ok());
  EXPECT_EQ(m_->TEST_CachedBlocks().size(), 3u);
  CheckInvariants();
}

TEST_F(BlockManagerTest, SwappedInBlocksRejoinThePrefixCache) {
  Make(/*device=*/8, /*cpu=*/8, /*block_size=*/4, 0.0, /*prefix_caching=*/true);
  const std::vector<int32_t> prompt = Tokens(9);
  Alloc(1, prompt);
  const std::vector<int64_t> group = {1};
  ASSERT_TRUE(m_->SwapOut(group).ok());
  Alloc(2, Tokens(32, 900));  // a different prompt takes every block, evicting the cached ones
  EXPECT_EQ(m_->GetStats().device_cached_evictable, 0);
  Free(2);
  ASSERT_TRUE(m_->SwapIn(group).ok());
  EXPECT_EQ(Alloc(3, prompt), 8);  // the swapped-in copies serve the hit
  EXPECT_EQ(m_->BlockTable(3)[0], m_->BlockTable(1)[0]);
  CheckInvariants();
}

TEST_F(BlockManagerTest, LiveSlotsCountSharedBlocksOnce) {
  Make(/*device=*/16, 0, /*block_size=*/4);
  Alloc(1, Tokens(6));  // 4 + 2 slots live
  ASSERT_TRUE(m_->Fork(1, 2).ok());
  live_.insert(2);
  EXPECT_EQ(m_->LiveDeviceTokenSlots(), 6);
  Append(2);  // copy-on-write: the child's last block is its own, 3 slots live
  EXPECT_EQ(m_->LiveDeviceTokenSlots(), 9);
}

TEST_F(BlockManagerTest, FreedCachedBlocksAreEvictedLeastRecentlyReleasedFirst) {
  Make(/*device=*/4, 0, /*block_size=*/4, 0.0, /*prefix_caching=*/true);
  const std::vector<int32_t> p = Tokens(9), q = Tokens(9, 500);
  Alloc(1, p);  // blocks p0 p1 (cached) + partial
  const int32_t p0 = m_->BlockTable(1)[0];
  Free(1);  // released tail first: p1 becomes evictable before p0
  EXPECT_EQ(FreeDevice(), 4);
  EXPECT_EQ(m_->GetStats().device_cached_evictable, 2);
  CheckInvariants();
  EXPECT_EQ(Alloc(2, q), 0);  // 2 free blocks + evicts p1
  EXPECT_EQ(m_->GetStats().device_cached_evictable, 1);
  EXPECT_EQ(m_->TEST_DeviceRefCount(p0), 1);  // p0 survives, held by the cache only
  CheckInvariants();
  Free(2);
  EXPECT_EQ(Alloc(3, p), 4);  // p0 still cached, p1 was evicted
  EXPECT_EQ(m_->BlockTable(3)[0], p0);
  CheckInvariants();
  Free(3);
  EXPECT_EQ(FreeDevice(), 4);
  CheckInvariants();
}

// The router predicts hits from prefix_filter() and block_hash.h alone: the filter holds exactly
// the chains the cache can hit, in the prompt's own namespace, and forgets evicted blocks.
TEST_F(BlockManagerTest, ThePrefixFilterNamesWhatTheCacheHolds) {
  Make(/*device=*/4, 0, /*block_size=*/4, 0.0, /*prefix_caching=*/true);
  auto matched = [&](const std::vector<int32_t>& prompt, uint64_t ns) {
    std::string bits;
    m_->prefix_filter()->Snapshot(&bits);
    auto view = PrefixFilterView::Parse(std::move(bits), kPrefixFilterHashes);
    EXPECT_TRUE(view.ok()) << view.status();
    return view->MatchedPrefix(PrefixBlockHashes(prompt, 4, ns));
  };
  const std::vector<int32_t> p = Tokens(9), q = Tokens(9, 500);
  const uint64_t sql = PrefixCacheNamespace("sql");
  const uint64_t v0 = m_->prefix_filter()->version();
  Alloc(1, p);
  EXPECT_NE(m_->prefix_filter()->version(), v0);
  EXPECT_EQ(matched(p, 0), 2);
  EXPECT_EQ(matched(p, sql), 0);  // another adapter's request would not hit
  EXPECT_EQ(matched(q, 0), 0);
  Free(1);
  EXPECT_EQ(matched(p, 0), 2);  // freed but still cached: still a hit
  Alloc(2, q);                  // evicts p's second block
  EXPECT_EQ(matched(p, 0), 1);
  EXPECT_EQ(matched(q, 0), 2);
  Make(/*device=*/4, 0, /*block_size=*/4);
  EXPECT_EQ(m_->prefix_filter(), nullptr);  // prefix caching off: nothing to report
}

// Random operations against a simulated KV memory: every copy the manager returns is executed
// and every token written to its slot, so a wrong share, copy or cache hit shows up as a
// sequence whose blocks do not hold its tokens. 2 x 60,000 operations: allocate (often a prefix
// hit), append with copy-on-write, fork, free in any state (abort), swap out, swap in; the
// accounting invariants are checked after every one.
TEST_F(BlockManagerTest, RandomOperationsKeepInvariantsAndContents) {
  constexpr int32_t kBs = 4;
  for (bool caching : {false, true}) {
    Make(/*device=*/24, /*cpu=*/16, kBs, /*watermark=*/0.0, caching);
    live_.clear();
    std::mt19937 rng(caching ? 7 : 3);
    std::vector<std::vector<int32_t>> dev_mem(24, std::vector<int32_t>(kBs, -1));
    std::vector<std::vector<int32_t>> cpu_mem(16, std::vector<int32_t>(kBs, -1));
    std::map<int64_t, std::vector<int32_t>> tokens;  // the model of each live sequence
    const std::vector<int32_t> bases[] = {Tokens(12, 0), Tokens(12, 50)};
    int64_t next_id = 0;
    int cow_copies = 0, swaps = 0;
    auto pick = [&](bool swapped) -> int64_t {
      std::vector<int64_t> ids;
      for (int64_t id : live_) {
        if (m_->IsSwapped(id) == swapped) ids.push_back(id);
      }
      return ids.empty() ? -1 : ids[rng() % ids.size()];
    };
    auto write = [&](int64_t id, int64_t pos, int32_t tok) {
      dev_mem[m_->BlockTable(id)[pos / kBs]][pos % kBs] = tok;
    };
    for (int step = 0; step < 60000; ++step) {
      const int op = rng() % 7;
      if (op <= 1) {  // allocate a prompt that often shares a prefix
        const std::vector<int32_t>& base = bases[rng() % 2];
        std::vector<int32_t> prompt(base.begin(), base.begin() + 1 + rng() % 12);
        for (int extra = rng() % 3; extra > 0; --extra) prompt.push_back(rng() % 5);
        const int64_t id = next_id++;
        auto hit = m_->Allocate(id, prompt);
        if (hit.ok()) {
          ASSERT_LT(*hit, static_cast<int64_t>(prompt.size()));
          ASSERT_EQ(*hit % kBs, 0);
          live_.insert(id);
          tokens[id] = prompt;
          for (int64_t i = *hit; i < static_cast<int64_t>(prompt.size()); ++i) {
            write(id, i, prompt[i]);
          }
          ASSERT_TRUE(m_->MarkComputed(id, static_cast<int64_t>(prompt.size())).ok());
        } else {
          ASSERT_EQ(hit.status().code(), absl::StatusCode::kResourceExhausted);
        }
      } else if (op == 2) {
        const int64_t id = pick(false);
        if (id < 0) continue;
        std::vector<KvCopy> copies;
        const int32_t tok = rng() % 5;
        absl::Status s = m_->AppendSlot(id, tok, &copies);
        if (!s.ok()) {
          ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
          continue;
        }
        ASSERT_LE(copies.size(), 1u);
        cow_copies += static_cast<int>(copies.size());
        for (const KvCopy& c : copies) dev_mem[c.dst] = dev_mem[c.src];
        write(id, tokens[id].size(), tok);
        tokens[id].push_back(tok);
        ASSERT_TRUE(m_->MarkComputed(id, static_cast<int64_t>(tokens[id].size())).ok());
      } else if (op == 3) {
        const int64_t id = pick(false);
        if (id < 0) continue;
        ASSERT_TRUE(m_->Fork(id, next_id).ok());
        tokens[next_id] = tokens[id];
        live_.insert(next_id++);
      } else if (op == 4) {
        if (live_.empty()) continue;
        auto it = live_.begin();
        std::advance(it, rng() % live_.size());
        const int64_t id = *it;
        ASSERT_TRUE(m_->Free(id).ok());
        live_.erase(id);
        tokens.erase(id);
      } else {  // swap a group of 1-2 sequences out (op 5) or in (op 6)
        const bool in = op == 6;
        std::vector<int64_t> group;
        for (int k = 1 + rng() % 2; k > 0; --k) {
          const int64_t id = pick(in);
          if (id >= 0 && std::find(group.begin(), group.end(), id) == group.end()) {
            group.push_back(id);
          }
        }
        if (group.empty()) continue;
        std::set<int32_t> distinct;
        for (int64_t id : group) {
          for (int32_t b : m_->BlockTable(id)) distinct.insert(b);
        }
        auto copies = in ? m_->SwapIn(group) : m_->SwapOut(group);
        if (!copies.ok()) {
          ASSERT_EQ(copies.status().code(), absl::StatusCode::kResourceExhausted);
          continue;
        }
        ASSERT_EQ(copies->size(), distinct.size());
        ++swaps;
        for (const KvCopy& c : *copies) {
          if (in) {
            dev_mem[c.dst] = cpu_mem[c.src];
          } else {
            cpu_mem[c.dst] = dev_mem[c.src];
          }
        }
      }
      ASSERT_NO_FATAL_FAILURE(CheckInvariants()) << "step " << step;
      for (const auto& [id, toks] : tokens) {
        const auto& table = m_->BlockTable(id);
        const auto& mem = m_->IsSwapped(id) ? cpu_mem : dev_mem;
        ASSERT_EQ(m_->NumTokens(id), static_cast<int64_t>(toks.size()));
        for (size_t i = 0; i < toks.size(); ++i) {
          ASSERT_EQ(mem[table[i / kBs]][i % kBs], toks[i])
              << "step " << step << " seq " << id << " token " << i;
        }
      }
    }
    EXPECT_GT(cow_copies, 10);
    EXPECT_GT(swaps, 10);
    if (caching) {
      EXPECT_GT(m_->GetStats().prefix_cache_hit_tokens, 0);
    }
    for (int64_t id : std::set<int64_t>(live_)) Free(id);
    CheckInvariants();
    EXPECT_EQ(FreeDevice(), 24);
    EXPECT_EQ(m_->NumFreeSwapBlocks(), 16);
  }
}

}  // namespace
}  // namespace pagellm
