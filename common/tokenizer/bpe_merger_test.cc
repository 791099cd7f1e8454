#include "common/tokenizer/bpe_merger.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;

Ids Merge(const BpeMerger& m, Ids ids) {
  BpeMerger::Scratch scratch;
  m.Merge(&ids, &scratch);
  return ids;
}

TEST(BpeMergerTest, AppliesTheLowestRankFirst) {
  BpeMerger m;
  m.Add(1, 2, 10, /*rank=*/1);  // 1 2 -> 10
  m.Add(2, 3, 11, /*rank=*/0);  // 2 3 -> 11
  EXPECT_EQ(Merge(m, {1, 2, 3}), (Ids{1, 11}));
  EXPECT_EQ(Merge(m, {1, 2, 4}), (Ids{10, 4}));
}

TEST(BpeMergerTest, ChainsMergesAndPrefersTheLeftmostAmongEqualRanks) {
  BpeMerger m;
  m.Add(1, 1, 5, 0);
  m.Add(5, 5, 6, 1);
  EXPECT_EQ(Merge(m, {1, 1, 1}), (Ids{5, 1}));
  EXPECT_EQ(Merge(m, {1, 1, 1, 1}), (Ids{6}));
  EXPECT_EQ(Merge(m, {1, 1, 1, 1, 1}), (Ids{6, 1}));
}

TEST(BpeMergerTest, KeepsTheFirstRuleForAPair) {
  BpeMerger m;
  EXPECT_TRUE(m.Add(1, 2, 10, 0));
  EXPECT_FALSE(m.Add(1, 2, 11, 1));
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(Merge(m, {1, 2}), (Ids{10}));
}

TEST(BpeMergerTest, HandlesEmptyAndSingleInputs) {
  BpeMerger m;
  m.Add(1, 2, 3, 0);
  EXPECT_EQ(Merge(m, {}), (Ids{}));
  EXPECT_EQ(Merge(m, {1}), (Ids{1}));
}

// Reference: repeatedly scan for the best (rank, position) pair and merge it; O(n^2).
Ids NaiveMerge(const std::vector<std::tuple<int32_t, int32_t, int32_t>>& rules, Ids ids) {
  while (true) {
    int best_rank = -1;
    size_t best_pos = 0;
    int32_t best_id = 0;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      for (size_t r = 0; r < rules.size(); ++r) {
        const auto& [l, rt, id] = rules[r];
        if (ids[i] == l && ids[i + 1] == rt && (best_rank < 0 || static_cast<int>(r) < best_rank)) {
          best_rank = static_cast<int>(r);
          best_pos = i;
          best_id = id;
        }
      }
    }
    if (best_rank < 0) return ids;
    ids[best_pos] = best_id;
    ids.erase(ids.begin() + best_pos + 1);
  }
}

TEST(BpeMergerTest, AgreesWithANaiveReferenceOnRandomInputs) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    // Symbols 0..4; rules over symbols 0..9 produce new ids 5..9.
    std::vector<std::tuple<int32_t, int32_t, int32_t>> rules;
    BpeMerger m;
    for (int32_t id = 5; id < 10; ++id) {
      const int32_t l = rng() % id, r = rng() % id;
      if (m.Add(l, r, id, static_cast<int32_t>(rules.size()))) rules.emplace_back(l, r, id);
    }
    for (int t = 0; t < 40; ++t) {
      Ids ids(rng() % 30);
      for (int32_t& x : ids) x = rng() % 5;
      EXPECT_EQ(Merge(m, ids), NaiveMerge(rules, ids));
    }
  }
}

}  // namespace
}  // namespace pagellm
