#include "worker/engine/ngram_proposer.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

std::vector<int32_t> Propose(const std::vector<int32_t>& tokens, int32_t min_n, int32_t max_n,
                             int32_t k) {
  NgramOptions o;
  o.num_speculative_tokens = k;
  o.prompt_lookup_min = min_n;
  o.prompt_lookup_max = max_n;
  std::vector<int32_t> out(k);
  out.resize(ProposeNgram(tokens, o, out));
  return out;
}

// The definition, the slow way: for n from max down to min, the last n tokens' most recent
// earlier occurrence (one ending before the end), and what followed it.
std::vector<int32_t> Reference(const std::vector<int32_t>& t, int32_t min_n, int32_t max_n,
                               int32_t k) {
  const int64_t len = static_cast<int64_t>(t.size());
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const std::vector<int32_t> suffix(t.end() - n, t.end());
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (std::equal(suffix.begin(), suffix.end(), t.begin() + start)) {
        const int64_t from = start + n;
        const int64_t count = std::min<int64_t>(k, len - from);
        return {t.begin() + from, t.begin() + from + count};
      }
    }
  }
  return {};
}

TEST(NgramProposerTest, ProposesWhatFollowedTheSuffixEarlier) {
  // "1 2 3 4 5 ... 1 2 3": the suffix "1 2 3" occurred at the start, followed by 4 5 6.
  EXPECT_EQ(Propose({1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 2, 3, 3), (std::vector<int32_t>{4, 5, 6}));
  // Proposals stop at the end of the context.
  EXPECT_EQ(Propose({1, 2, 3, 4, 1, 2, 3}, 2, 3, 8), (std::vector<int32_t>{4, 1, 2, 3}));
}

TEST(NgramProposerTest, PrefersTheLongestMatchThenTheMostRecent) {
  // "7 8" occurs twice (followed by 1, then by 2); "6 7 8" only once (followed by 3).
  EXPECT_EQ(Propose({6, 7, 8, 3, 0, 7, 8, 1, 0, 7, 8, 2, 0, 6, 7, 8}, 2, 3, 1),
            (std::vector<int32_t>{3}));
  // Without the 3-gram, the most recent 2-gram wins.
  EXPECT_EQ(Propose({5, 7, 8, 3, 0, 7, 8, 1, 0, 7, 8, 2, 0, 6, 7, 8}, 2, 3, 1),
            (std::vector<int32_t>{2}));
}

TEST(NgramProposerTest, NothingBelowTheShortestMatchOrWithNoRoom) {
  EXPECT_TRUE(Propose({1, 2, 3, 9, 2, 3}, 3, 4, 4).empty());  // only a 2-gram recurs
  EXPECT_EQ(Propose({1, 2, 3, 9, 2, 3}, 2, 4, 4), (std::vector<int32_t>{9, 2, 3}));
  EXPECT_TRUE(Propose({4}, 1, 1, 4).empty());
  EXPECT_TRUE(Propose({4, 4}, 1, 1, 0).empty());
  EXPECT_EQ(Propose({4, 4}, 1, 1, 3), (std::vector<int32_t>{4}));
}

TEST(NgramProposerTest, AgreesWithTheDefinitionOnRandomText) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 3000; ++iter) {
    const int len = 1 + static_cast<int>(rng() % 60);
    const int vocab = 2 + static_cast<int>(rng() % 5);  // small: many repeats
    std::vector<int32_t> t(len);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
    const int32_t min_n = 1 + static_cast<int32_t>(rng() % 4);
    const int32_t max_n = min_n + static_cast<int32_t>(rng() % 5);
    const int32_t k = static_cast<int32_t>(rng() % 7);
    ASSERT_EQ(Propose(t, min_n, max_n, k), Reference(t, min_n, max_n, k))
        << "iteration " << iter << " len " << len << " n " << min_n << ".." << max_n;
  }
}

TEST(NgramProposerTest, ValidatesItsSizes) {
  NgramOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.num_speculative_tokens = 33;
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  o.num_speculative_tokens = 4;
  o.prompt_lookup_min = 3;
  o.prompt_lookup_max = 2;
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  o.prompt_lookup_min = 0;
  o.prompt_lookup_max = 2;
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  o.prompt_lookup_min = 1;
  o.prompt_lookup_max = 65;
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagellm
