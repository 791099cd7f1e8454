#include "common/prefix_cache/prefix_filter.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

std::vector<uint64_t> RandomHashes(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> v(n);
  for (auto& h : v) h = rng();
  return v;
}

PrefixFilterView View(const CountingPrefixFilter& f) {
  std::string bits;
  f.Snapshot(&bits);
  auto view = PrefixFilterView::Parse(std::move(bits), kPrefixFilterHashes);
  EXPECT_TRUE(view.ok()) << view.status();
  return view.ok() ? *std::move(view) : PrefixFilterView();
}

TEST(PrefixFilterTest, SizedAtSixteenBitsPerBlockWithinBounds) {
  EXPECT_EQ(CountingPrefixFilter(10, 0).num_bits(), kPrefixFilterMinBits);
  EXPECT_EQ(CountingPrefixFilter(1000, 0).num_bits(), 16384);  // 16,000 rounded up
  EXPECT_EQ(CountingPrefixFilter(int64_t{1} << 40, 0).num_bits(), kPrefixFilterMaxBits);
}

TEST(PrefixFilterTest, NoFalseNegativesAndFewFalsePositivesWhenFull) {
  const int n = 4000;
  CountingPrefixFilter f(n, 0);
  const auto in = RandomHashes(n, 1), out = RandomHashes(20000, 2);
  for (uint64_t h : in) f.Add(h);
  const PrefixFilterView view = View(f);
  for (uint64_t h : in) ASSERT_TRUE(view.MayContain(h));
  int false_positives = 0;
  for (uint64_t h : out) false_positives += view.MayContain(h) ? 1 : 0;
  // 65,536 bits for 4,000 hashes: (1 - e^(-6*4000/65536))^6 = 0.0006, about 12 of 20,000.
  EXPECT_LT(false_positives, 40);
}

TEST(PrefixFilterTest, RemovingAHashForgetsItAndKeepsTheOthers) {
  CountingPrefixFilter f(100, 0);
  const auto hashes = RandomHashes(50, 3);
  for (uint64_t h : hashes) f.Add(h);
  for (size_t i = 0; i < hashes.size(); i += 2) f.Remove(hashes[i]);
  const PrefixFilterView view = View(f);
  int forgotten = 0;
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (i % 2 == 1) {
      EXPECT_TRUE(view.MayContain(hashes[i]));
    } else {
      forgotten += view.MayContain(hashes[i]) ? 0 : 1;
    }
  }
  EXPECT_GE(forgotten, 24);  // of 25 (one may collide with the 25 kept)
  for (size_t i = 1; i < hashes.size(); i += 2) f.Remove(hashes[i]);
  std::string bits;
  f.Snapshot(&bits);
  EXPECT_EQ(bits, std::string(bits.size(), '\0'));
}

TEST(PrefixFilterTest, TheVersionChangesExactlyWhenABitDoes) {
  CountingPrefixFilter f(100, 7);
  EXPECT_EQ(f.version(), 7u);
  f.Add(42);
  const uint64_t v1 = f.version();
  EXPECT_NE(v1, 7u);
  f.Add(42);  // counters only
  EXPECT_EQ(f.version(), v1);
  f.Remove(42);
  EXPECT_EQ(f.version(), v1);
  f.Remove(42);
  EXPECT_NE(f.version(), v1);
  std::string bits;
  EXPECT_EQ(f.Snapshot(&bits), f.version());
}

TEST(PrefixFilterTest, MatchedPrefixStopsAtTheFirstMissingBlock) {
  CountingPrefixFilter f(100, 0);
  const auto chain = RandomHashes(6, 4);
  f.Add(chain[0]);
  f.Add(chain[1]);
  f.Add(chain[3]);  // block 3 without block 2 cannot be a hit
  const PrefixFilterView view = View(f);
  EXPECT_EQ(view.MatchedPrefix(chain), 2);
  EXPECT_EQ(view.MatchedPrefix(std::span(chain).first(1)), 1);
  EXPECT_EQ(PrefixFilterView().MatchedPrefix(chain), 0);
}

TEST(PrefixFilterTest, ParseRefusesMalformedFilters) {
  EXPECT_FALSE(PrefixFilterView::Parse("", 6).ok());
  EXPECT_FALSE(PrefixFilterView::Parse(std::string(12, '\0'), 6).ok());
  EXPECT_FALSE(PrefixFilterView::Parse(std::string(2 << 20, '\0'), 6).ok());
  EXPECT_FALSE(PrefixFilterView::Parse(std::string(64, '\0'), 0).ok());
  EXPECT_FALSE(PrefixFilterView::Parse(std::string(64, '\0'), 17).ok());
  EXPECT_TRUE(PrefixFilterView::Parse(std::string(8, '\xff'), 16).ok());
}

}  // namespace
}  // namespace pagellm
