#include "worker/engine/stop_matcher.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

// What the matcher must report after `text`, computed the slow way over every stop string.
struct Expected {
  int32_t completed = -1;
  int32_t pending = 0;
};

Expected BruteForce(const std::string& text, const std::vector<std::string>& stops) {
  Expected e;
  for (size_t i = 0; i < stops.size(); ++i) {
    const std::string& s = stops[i];
    const bool ends =
        text.size() >= s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0;
    if (ends && (e.completed < 0 || s.size() > stops[e.completed].size())) {
      e.completed = static_cast<int32_t>(i);
    }
    // Longest suffix of text that is a proper prefix of s.
    for (size_t len = std::min(text.size(), s.size() - 1); len > 0; --len) {
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        e.pending = std::max<int32_t>(e.pending, static_cast<int32_t>(len));
        break;
      }
    }
  }
  return e;
}

TEST(StopMatcherTest, FindsTheLongestStopEndingAtEachByte) {
  const StopMatcher m({"he", "she", "his", "hers"});
  StopMatcher::State s = 0;
  std::vector<int32_t> completed;
  for (char c : std::string("ushers")) {
    s = m.Next(s, c);
    completed.push_back(m.Completed(s));
  }
  // u s h e(she beats he) r s(hers)
  EXPECT_EQ(completed, (std::vector<int32_t>{-1, -1, -1, 1, -1, 3}));
}

TEST(StopMatcherTest, DuplicatesReportTheFirstIndex) {
  const StopMatcher m({"ab", "xy", "ab"});
  StopMatcher::State s = m.Next(m.Next(0, 'a'), 'b');
  EXPECT_EQ(m.Completed(s), 0);
}

TEST(StopMatcherTest, PendingIsTheLongestProperPrefixSuffix) {
  const StopMatcher m({"abc", "bcd"});
  StopMatcher::State s = 0;
  for (char c : std::string("xab")) s = m.Next(s, c);
  EXPECT_EQ(m.Pending(s), 2);  // "ab" of "abc"
  s = m.Next(s, 'c');          // "abc" completes; "bc" may still grow into "bcd"
  EXPECT_EQ(m.Completed(s), 0);
  EXPECT_EQ(m.Pending(s), 2);
}

TEST(StopMatcherTest, SizeIsLinearInTheStopBytes) {
  std::vector<std::string> stops;
  size_t bytes = 0;
  for (int i = 0; i < 32; ++i) {
    stops.push_back(std::string(128, static_cast<char>('a' + i % 26)) + std::to_string(i));
    bytes += stops.back().size();
  }
  const StopMatcher m(stops);
  EXPECT_LE(m.num_states(), bytes + 1);
}

// Random alphabets small enough that stop strings overlap a lot, up to 40 strings.
TEST(StopMatcherTest, RandomTextsMatchBruteForce) {
  std::mt19937 gen(7);
  auto random_string = [&](int min_len, int max_len, int alphabet) {
    std::string s(std::uniform_int_distribution<int>(min_len, max_len)(gen), 'a');
    for (char& c : s)
      c = static_cast<char>('a' + std::uniform_int_distribution<int>(0, alphabet - 1)(gen));
    return s;
  };
  for (int iter = 0; iter < 500; ++iter) {
    const int alphabet = 2 + iter % 3;
    std::vector<std::string> stops;
    const int count = std::uniform_int_distribution<int>(1, 40)(gen);
    for (int i = 0; i < count; ++i) stops.push_back(random_string(1, 6, alphabet));
    const StopMatcher m(stops);
    const std::string text = random_string(0, 60, alphabet);
    StopMatcher::State s = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      s = m.Next(s, text[i]);
      const Expected e = BruteForce(text.substr(0, i + 1), stops);
      ASSERT_EQ(m.Completed(s), e.completed) << "iter " << iter << " at " << i;
      ASSERT_EQ(m.Pending(s), e.pending) << "iter " << iter << " at " << i;
    }
  }
}

}  // namespace
}  // namespace pagellm
