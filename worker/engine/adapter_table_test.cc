#include "worker/engine/adapter_table.h"

#include "common/prefix_cache/block_hash.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

TEST(AdapterTableTest, StartsWithTheBackendsAdaptersAndEmptySlots) {
  AdapterTable t({"sql", "", "chat"});
  EXPECT_EQ(t.Served(), (std::vector<std::string>{"sql", "chat"}));
  EXPECT_EQ(*t.Find("chat"), 2);
  const absl::StatusOr<int32_t> missing = t.Find("other");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("sql, chat"), std::string::npos);
  EXPECT_EQ(*t.EmptySlotFor("other"), 1);
  EXPECT_EQ(t.EmptySlotFor("sql").status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(AdapterTableTest, ARetiredAdapterKeepsItsSlotUntilItsLastRequestEnds) {
  AdapterTable t({"sql"});
  t.Acquire(0);
  t.Acquire(0);
  EXPECT_FALSE(t.Retire(0));  // two requests still use it
  EXPECT_EQ(t.Find("sql").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(t.Served().empty());
  // Its slot is not free yet: a new adapter has nowhere to go.
  const absl::StatusOr<int32_t> full = t.EmptySlotFor("sql");
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("1 by adapters being unloaded"), std::string::npos);
  EXPECT_FALSE(t.Release(0));
  EXPECT_TRUE(t.Release(0));  // the last one: the caller frees the slot
  t.Free(0);
  EXPECT_EQ(*t.EmptySlotFor("sql"), 0);
}

TEST(AdapterTableTest, AnUnusedAdapterRetiresAtOnce) {
  AdapterTable t({"sql"});
  EXPECT_TRUE(t.Retire(0));
  t.Free(0);
  EXPECT_EQ(*t.EmptySlotFor("x"), 0);
}

TEST(AdapterTableTest, AReloadedNameGetsAPrefixCacheNamespaceOfItsOwn) {
  AdapterTable t({"", ""});
  t.Install(0, "sql");
  // The first adapter under a name: the namespace every worker and the router compute.
  EXPECT_EQ(t.cache_namespace(0), PrefixCacheNamespace("sql"));
  t.Acquire(0);
  EXPECT_FALSE(t.Retire(0));
  // Loaded again (other weights, perhaps) while the old one drains: another slot, another
  // namespace, so that its requests never read the old adapter's KV.
  t.Install(*t.EmptySlotFor("sql"), "sql");
  EXPECT_EQ(*t.Find("sql"), 1);
  EXPECT_NE(t.cache_namespace(1), t.cache_namespace(0));
  EXPECT_NE(t.cache_namespace(1), PrefixCacheNamespace(""));
}

}  // namespace
}  // namespace pagellm
