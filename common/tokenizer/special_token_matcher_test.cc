#include "common/tokenizer/special_token_matcher.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

std::vector<std::pair<std::string, int>> Split(const SpecialTokenMatcher& m, std::string_view text,
                                               bool parse_special) {
  std::vector<SpecialTokenMatcher::Fragment> frags;
  m.Split(text, parse_special, &frags);
  std::vector<std::pair<std::string, int>> out;
  for (const auto& f : frags) out.emplace_back(std::string(f.text), f.id);
  return out;
}

TEST(SpecialTokenMatcherTest, TakesTheLongestTokenAtTheLeftmostPosition) {
  SpecialTokenMatcher m({{"<a>", 1, true}, {"<a><b>", 2, true}, {"b>", 3, false}});
  EXPECT_THAT(Split(m, "x<a><b>y<a>", true),
              ElementsAre(Pair("x", -1), Pair("<a><b>", 2), Pair("y", -1), Pair("<a>", 1)));
  EXPECT_THAT(Split(m, "<a>b>", true), ElementsAre(Pair("<a>", 1), Pair("b>", 3)));
}

TEST(SpecialTokenMatcherTest, SkippedSpecialTokensStayTextAndShadowOverlaps) {
  SpecialTokenMatcher m({{"<a><b>", 2, true}, {"b>", 3, false}});
  // "<a><b>" is found but not parsed; "b>" inside it is not matched either.
  EXPECT_THAT(Split(m, "<a><b>b>", false), ElementsAre(Pair("<a><b>", -1), Pair("b>", 3)));
}

TEST(SpecialTokenMatcherTest, StripsWhitespaceAroundTokensThatAskForIt) {
  SpecialTokenMatcher m({{"<m>", 7, false, /*lstrip=*/true, /*rstrip=*/false},
                         {"<n>", 8, false, false, /*rstrip=*/true}});
  EXPECT_THAT(Split(m, "a \u3000<m> b<n> \t\nc", false),
              ElementsAre(Pair("a", -1), Pair(" \u3000<m>", 7), Pair(" b", -1), Pair("<n> \t\n", 8),
                          Pair("c", -1)));
  // lstrip never reaches back into an earlier token.
  EXPECT_THAT(Split(m, "<n> <m>", false), ElementsAre(Pair("<n> ", 8), Pair("<m>", 7)));
}

TEST(SpecialTokenMatcherTest, EmptyAndDuplicateEntriesAreIgnored) {
  SpecialTokenMatcher m({{"", 1}, {"<a>", 2}, {"<a>", 3}});
  EXPECT_THAT(Split(m, "<a>", true), ElementsAre(Pair("<a>", 2)));
  EXPECT_TRUE(Split(m, "", true).empty());
  EXPECT_TRUE(SpecialTokenMatcher().empty());
}

}  // namespace
}  // namespace pagellm
