#include "common/prefix_cache/block_hash.h"

#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

std::vector<int32_t> Iota(int n, int32_t first = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(PrefixBlockHashesTest, OneHashPerFullBlockChainedFromTheNamespaceRoot) {
  const std::vector<int32_t> tokens = Iota(35);
  const std::vector<uint64_t> h = PrefixBlockHashes(tokens, 16, 0);
  ASSERT_EQ(h.size(), 2u);  // the 3 tokens of the partial block are not hashed
  EXPECT_EQ(h[0], HashPrefixBlock(PrefixCacheRoot(0), std::span(tokens).first(16)));
  EXPECT_EQ(h[1], HashPrefixBlock(h[0], std::span(tokens).subspan(16, 16)));
  EXPECT_EQ(PrefixBlockHashes(tokens, 16, 0, /*max_blocks=*/1), std::vector<uint64_t>{h[0]});
  EXPECT_TRUE(PrefixBlockHashes(Iota(15), 16, 0).empty());
}

TEST(PrefixBlockHashesTest, AHashNamesTheWholePrefixNotJustItsBlock) {
  std::vector<int32_t> a = Iota(32), b = Iota(32);
  b[3] = 999;  // first block differs, second block's tokens are equal
  const auto ha = PrefixBlockHashes(a, 16, 0), hb = PrefixBlockHashes(b, 16, 0);
  EXPECT_NE(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]);
  // A longer prompt with the same start shares the leading hashes.
  std::vector<int32_t> c = Iota(64);
  const auto hc = PrefixBlockHashes(c, 16, 0);
  EXPECT_EQ(hc[0], ha[0]);
  EXPECT_EQ(hc[1], ha[1]);
}

TEST(PrefixBlockHashesTest, NamespacesKeepAdaptersApart) {
  EXPECT_EQ(PrefixCacheNamespace(""), 0u);
  const uint64_t sql = PrefixCacheNamespace("sql"), chat = PrefixCacheNamespace("chat");
  EXPECT_NE(sql, 0u);
  EXPECT_NE(sql, chat);
  EXPECT_EQ(sql, PrefixCacheNamespace("sql"));  // the same in every process
  EXPECT_NE(PrefixCacheNamespace("ab"), PrefixCacheNamespace("ba"));
  const std::vector<int32_t> tokens = Iota(16);
  std::set<uint64_t> firsts;
  for (uint64_t ns : {uint64_t{0}, sql, chat}) firsts.insert(PrefixBlockHashes(tokens, 16, ns)[0]);
  EXPECT_EQ(firsts.size(), 3u);
}

// vLLM's cache_salt: no salt leaves the namespace as it is; a salt gives the (adapter, salt)
// pair a namespace of its own, the same in every process.
TEST(PrefixBlockHashesTest, ASaltGivesTheRequestsThatShareItANamespaceOfTheirOwn) {
  const uint64_t sql = PrefixCacheNamespace("sql");
  EXPECT_EQ(SaltedCacheNamespace(0, ""), 0u);
  EXPECT_EQ(SaltedCacheNamespace(sql, ""), sql);
  std::set<uint64_t> all = {0, sql};
  for (uint64_t ns : {uint64_t{0}, sql}) {
    for (const char* salt : {"tenant-a", "tenant-b", "tenant-a\n", "a"}) {
      EXPECT_EQ(SaltedCacheNamespace(ns, salt), SaltedCacheNamespace(ns, salt));
      EXPECT_NE(SaltedCacheNamespace(ns, salt), 0u);
      all.insert(SaltedCacheNamespace(ns, salt));
    }
  }
  EXPECT_EQ(all.size(), 10u) << "every (adapter, salt) pair apart";
}

TEST(PrefixBlockHashesTest, TokenIdsAreHashedAsUnsigned32BitValues) {
  // Negative ids never reach the cache, but the hash must still be total and distinct.
  EXPECT_NE(HashPrefixBlock(1, std::vector<int32_t>{-1}),
            HashPrefixBlock(1, std::vector<int32_t>{1}));
  EXPECT_NE(HashPrefixBlock(1, std::vector<int32_t>{7}),
            HashPrefixBlock(2, std::vector<int32_t>{7}));
}

}  // namespace
}  // namespace pagellm
