#include "worker/engine/adapter_table.h"

#include <memory>
#include <string>

#include "common/prefix_cache/block_hash.h"
#include "gtest/gtest.h"
#include "worker/model/lora_adapter.h"

namespace pagellm {
namespace {

// An adapter as read from `files` (LoraAdapter::files: what the file system said of them).
std::shared_ptr<const LoraAdapter> Weights(const std::string& name,
                                           const std::string& files = "v1") {
  auto a = std::make_shared<LoraAdapter>();
  a->name = name;
  a->path = "/adapters/" + name;
  a->files = files;
  a->rank = 8;
  return a;
}

TEST(AdapterTableTest, StartsWithTheBackendsAdaptersFixedInTheirSlots) {
  AdapterTable t({"sql", "", "chat"}, 0);
  EXPECT_EQ(t.Served(), (std::vector<std::string>{"sql", "chat"}));
  const int32_t chat = *t.Find("chat");
  EXPECT_EQ(t.slot(chat), 2);
  EXPECT_FALSE(t.moves(chat));
  const absl::StatusOr<int32_t> missing = t.Find("other");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("sql, chat"), std::string::npos);
  EXPECT_EQ(t.Add(Weights("sql")).status().code(), absl::StatusCode::kAlreadyExists);
  // One slot is free for adapters that move; capacity (raised to the 3 slots) has one id left.
  EXPECT_EQ(t.moving_slots(), 1);
  const int32_t other = *t.Add(Weights("other"));
  EXPECT_TRUE(t.moves(other));
  EXPECT_EQ(t.slot(other), -1);  // in no slot until a step needs it
  EXPECT_EQ(t.SlotToFill(1), 1);
  const absl::StatusOr<int32_t> full = t.Add(Weights("third"));
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("--max-cpu-loras"), std::string::npos);
}

TEST(AdapterTableTest, ServesMoreAdaptersThanSlotsUpToItsCapacity) {
  AdapterTable t({"", ""}, 4);
  int32_t ids[4];
  for (int i = 0; i < 4; ++i) ids[i] = *t.Add(Weights("a" + std::to_string(i)));
  EXPECT_EQ(t.Served().size(), 4u);
  EXPECT_EQ(t.Add(Weights("a4")).status().code(), absl::StatusCode::kResourceExhausted);
  // Step 1 needs a0 and a1: the two empty slots.
  t.Touch(ids[0], 1);
  t.Touch(ids[1], 1);
  t.Place(ids[0], t.SlotToFill(1));
  t.Place(ids[1], t.SlotToFill(1));
  EXPECT_EQ(t.slot(ids[0]), 0);
  EXPECT_EQ(t.slot(ids[1]), 1);
  EXPECT_EQ(t.SlotToFill(1), -1);  // both hold adapters step 1 uses
  // Step 2 needs a1 and a2: a0's slot, the one not used in step 2.
  t.Touch(ids[1], 2);
  t.Touch(ids[2], 2);
  const int32_t slot = t.SlotToFill(2);
  EXPECT_EQ(slot, 0);
  EXPECT_TRUE(t.Vacate(slot));
  t.Place(ids[2], slot);
  EXPECT_EQ(t.slot(ids[0]), -1);
  EXPECT_EQ(t.slot(ids[2]), 0);
}

TEST(AdapterTableTest, TheLeastRecentlyUsedAdapterLeavesItsSlot) {
  AdapterTable t({"", ""}, 3);
  const int32_t a = *t.Add(Weights("a"));
  const int32_t b = *t.Add(Weights("b"));
  const int32_t c = *t.Add(Weights("c"));
  t.Touch(a, 1);
  t.Place(a, t.SlotToFill(1));
  t.Touch(b, 2);
  t.Place(b, t.SlotToFill(2));
  t.Touch(a, 3);  // a is used again after b
  t.Touch(c, 4);
  EXPECT_EQ(t.SlotToFill(4), t.slot(b));
}

TEST(AdapterTableTest, ARetiredAdapterStaysUntilItsLastRequestEnds) {
  AdapterTable t({"sql"}, 0);
  const int32_t sql = *t.Find("sql");
  t.Acquire(sql);
  t.Acquire(sql);
  EXPECT_FALSE(t.Retire(sql));  // two requests still use it
  EXPECT_EQ(t.Find("sql").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(t.Served().empty());
  // Its id and slot are not free yet: a new adapter has nowhere to go.
  const absl::StatusOr<int32_t> full = t.Add(Weights("sql"));
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("1 of them being unloaded"), std::string::npos);
  EXPECT_NE(full.status().message().find("--max-cpu-loras"), std::string::npos);
  EXPECT_FALSE(t.Release(sql));
  EXPECT_TRUE(t.Release(sql));  // the last one: the caller drops it
  EXPECT_EQ(t.Drop(sql), 0);    // its slot, to be emptied in the backend
  EXPECT_EQ(t.moving_slots(), 1);
  EXPECT_TRUE(t.Add(Weights("sql")).ok());
}

TEST(AdapterTableTest, SlotsHeldByFixedAdaptersOrBrokenTakeNoMovingAdapter) {
  AdapterTable t({"sql"}, 2);
  EXPECT_EQ(t.moving_slots(), 0);
  const absl::StatusOr<int32_t> refused = t.Add(Weights("x"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--lora-modules"), std::string::npos);
  EXPECT_EQ(t.SlotToFill(1), -1);
  const int32_t sql = *t.Find("sql");
  ASSERT_TRUE(t.Retire(sql));
  EXPECT_EQ(t.Drop(sql), 0);
  EXPECT_EQ(t.moving_slots(), 1);
  t.BreakSlot(0);
  EXPECT_EQ(t.moving_slots(), 0);
  EXPECT_EQ(t.SlotToFill(1), -1);
}

TEST(AdapterTableTest, AReloadedNameGetsAPrefixCacheNamespaceOfItsOwn) {
  AdapterTable t({"", ""}, 0);
  const int32_t first = *t.Add(Weights("sql"));
  // The first adapter under a name: the namespace every worker and the router compute.
  EXPECT_EQ(t.cache_namespace(first), PrefixCacheNamespace("sql"));
  t.Acquire(first);
  EXPECT_FALSE(t.Retire(first));
  // Loaded again (other weights, perhaps) while the old one drains: another id, another
  // namespace, so that its requests never read the old adapter's KV.
  const int32_t second = *t.Add(Weights("sql"));
  EXPECT_EQ(*t.Find("sql"), second);
  EXPECT_NE(t.cache_namespace(second), t.cache_namespace(first));
  EXPECT_NE(t.cache_namespace(second), PrefixCacheNamespace(""));
}

TEST(AdapterTableTest, ServesMoreAdaptersThanItHoldsLettingTheLeastRecentlyUsedGo) {
  AdapterTable t({"", ""}, 3, /*max_adapters=*/5);
  const int32_t a = *t.Add(Weights("a"));
  const int32_t b = *t.Add(Weights("b"));
  const int32_t c = *t.Add(Weights("c"));
  EXPECT_TRUE(t.full());
  EXPECT_EQ(t.Add(Weights("d")).status().code(), absl::StatusCode::kResourceExhausted);
  // Used in the order b, a (in a slot), c: b goes first.
  t.Touch(b, 1);
  t.Touch(a, 2);
  t.Place(a, t.SlotToFill(2));
  t.Touch(c, 3);
  EXPECT_EQ(t.EvictionCandidate(), b);
  t.Acquire(b);  // a request holds it: it stays
  EXPECT_EQ(t.EvictionCandidate(), a);
  EXPECT_EQ(t.Evict(a), 0);  // its slot, for the caller to empty
  EXPECT_EQ(t.slot(a), -1);
  EXPECT_EQ(t.SlotToFill(4), 0);
  EXPECT_FALSE(t.held(a));
  EXPECT_TRUE(t.NeedsRead(a));
  EXPECT_EQ(*t.Find("a"), a);  // still served
  EXPECT_EQ(t.num_held(), 2);
  const int32_t d = *t.Add(Weights("d"));
  t.Touch(d, 4);
  EXPECT_EQ(t.EvictionCandidate(), c);
  EXPECT_EQ(t.Evict(c), -1);
  const int32_t e = *t.Add(Weights("e"));
  t.Touch(e, 5);
  EXPECT_EQ(t.Served().size(), 5u);
  // Five served (three held): the most this table serves.
  const absl::StatusOr<int32_t> most = t.Add(Weights("f"));
  EXPECT_EQ(most.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(most.status().message().find("at most 5"), std::string::npos) << most.status();
  EXPECT_FALSE(t.Release(b));
  EXPECT_EQ(t.EvictionCandidate(), b);  // no request holds it any more
}

TEST(AdapterTableTest, AnAdapterReadAgainIsHeldAgainUnderTheSameNamespaceIfItsFilesAreTheSame) {
  AdapterTable t({""}, 1);
  const int32_t a = *t.Add(Weights("a", "v1"));
  // Full: a must go first.
  EXPECT_EQ(t.Add(Weights("b")).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(t.Evict(t.EvictionCandidate()), -1);
  EXPECT_TRUE(t.NeedsRead(a));
  const uint64_t ticket = t.BeginRead(a);
  EXPECT_FALSE(t.NeedsRead(a));  // once
  EXPECT_FALSE(t.held(a));       // not until it is read...
  EXPECT_TRUE(t.full());         // ...but it has its place
  EXPECT_EQ(t.EvictionCandidate(), -1);
  bool renamespaced = true;
  EXPECT_FALSE(t.EndRead(a, ticket + 1, Weights("a", "v1"), &renamespaced));  // not its read
  EXPECT_TRUE(t.EndRead(a, ticket, Weights("a", "v1"), &renamespaced));
  EXPECT_FALSE(renamespaced);
  EXPECT_TRUE(t.held(a));
  EXPECT_EQ(t.cache_namespace(a), PrefixCacheNamespace("a"));

  // Read again after its files changed: its requests must not read the KV cached before.
  EXPECT_EQ(t.Evict(a), -1);
  const uint64_t again = t.BeginRead(a);
  EXPECT_TRUE(t.EndRead(a, again, Weights("a", "v2"), &renamespaced));
  EXPECT_TRUE(renamespaced);
  EXPECT_NE(t.cache_namespace(a), PrefixCacheNamespace("a"));
  EXPECT_NE(t.cache_namespace(a), PrefixCacheNamespace(""));

  // A read that fails gives its place back.
  EXPECT_EQ(t.Evict(a), -1);
  const uint64_t failing = t.BeginRead(a);
  EXPECT_TRUE(t.EndRead(a, failing, nullptr, &renamespaced));
  EXPECT_EQ(t.num_held(), 0);
  EXPECT_TRUE(t.NeedsRead(a));
}

TEST(AdapterTableTest, AReadThatEndsAfterItsAdapterWasDroppedChangesNothing) {
  AdapterTable t({""}, 1);
  const int32_t a = *t.Add(Weights("a"));
  EXPECT_EQ(t.Evict(a), -1);
  const uint64_t ticket = t.BeginRead(a);
  ASSERT_TRUE(t.Retire(a));
  EXPECT_EQ(t.Drop(a), -1);
  EXPECT_EQ(t.num_held(), 0);  // the pending read's place is free again
  const int32_t b = *t.Add(Weights("b"));
  EXPECT_EQ(b, a);  // the id is reused...
  bool renamespaced = false;
  EXPECT_FALSE(t.EndRead(a, ticket, Weights("a"), &renamespaced));  // ...not by the old read
  EXPECT_EQ(t.name(b), "b");
  EXPECT_EQ(t.num_held(), 1);
}

}  // namespace
}  // namespace pagellm
