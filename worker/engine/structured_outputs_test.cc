#include "worker/engine/structured_outputs.h"

#include <string>
#include <thread>
#include <vector>

#include "common/structured/grammar_test_util.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using structured::test_util::Accepts;
using structured::test_util::Compile;

StructuredOutput Regex(std::string pattern) {
  StructuredOutput so;
  so.kind = StructuredOutput::Kind::kRegex;
  so.regex = std::move(pattern);
  return so;
}

TEST(GrammarBuilderTest, ARepeatedConstraintIsCopiedNotRebuilt) {
  GrammarBuildCache b;
  const StructuredOutput so = Regex("[a-c]{2}x|yz");
  auto first = b.Build(so);
  auto second = b.Build(so);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(b.built(), 1);
  EXPECT_EQ(b.reused(), 1);
  // The copy is the same language.
  for (const char* s : {"abx", "ccx", "yz", "ax", "abxx", "yzz", ""}) {
    EXPECT_EQ(Accepts(structured::GrammarMatcher(Compile(*first)), s),
              Accepts(structured::GrammarMatcher(Compile(*second)), s))
        << s;
  }
  EXPECT_TRUE(Accepts(structured::GrammarMatcher(Compile(*second)), "bcx"));
}

TEST(GrammarBuilderTest, KeepsTheMostRecentAndNeverAnError) {
  GrammarBuildCache b;
  for (int i = 0; i <= GrammarBuildCache::kKept; ++i)
    ASSERT_TRUE(b.Build(Regex("a{" + std::to_string(i + 1) + "}")).ok());
  EXPECT_EQ(b.built(), GrammarBuildCache::kKept + 1);
  ASSERT_TRUE(b.Build(Regex("a{" + std::to_string(GrammarBuildCache::kKept + 1) + "}")).ok());
  EXPECT_EQ(b.reused(), 1);  // the latest is kept ...
  ASSERT_TRUE(b.Build(Regex("a{1}")).ok());
  EXPECT_EQ(b.built(), GrammarBuildCache::kKept + 2);  // ... the oldest was dropped
  // A constraint that does not compile fails every time, with the compiler's message.
  for (int i = 0; i < 2; ++i) {
    auto bad = b.Build(Regex("(a"));
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(b.built(), GrammarBuildCache::kKept + 4);
}

TEST(GrammarBuilderTest, ThreadsShareIt) {
  GrammarBuildCache b;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&b, t] {
      for (int i = 0; i < 50; ++i) {
        EXPECT_TRUE(b.Build(Regex("x{" + std::to_string(1 + (i + t) % 4) + "}")).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(b.built() + b.reused(), 200);
  EXPECT_LE(b.built(), 16);  // each of the 4 at most once per thread
}

}  // namespace
}  // namespace pagellm
