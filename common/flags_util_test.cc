// ParseFlags: vLLM's spellings become absl's, repeatable flags are collected, and FlagGiven tells
// a flag on the command line from one left at its default.
#include "common/flags_util.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_FLAG(int32_t, max_things, 64, "a flag for the test");
ABSL_FLAG(double, warmth, 1.0, "another");
ABSL_FLAG(bool, loud, true, "a boolean");
ABSL_FLAG(int32_t, untouched, 5, "never given");

namespace pagellm::cli {
namespace {

std::vector<std::vector<std::string>> Parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseFlags(static_cast<int>(argv.size()), argv.data(), {"stop"});
}

TEST(FlagsUtilTest, FlagsGivenAreKnownWhateverTheirValueOrSpelling) {
  const auto repeated = Parse({"prog", "--max-things", "64", "--warmth=1.0", "--no-loud", "--stop",
                               "a", "--stop=b", "--", "--untouched=7"});
  EXPECT_EQ(absl::GetFlag(FLAGS_max_things), 64);
  EXPECT_FALSE(absl::GetFlag(FLAGS_loud));
  EXPECT_EQ(repeated, (std::vector<std::vector<std::string>>{{"a", "b"}}));
  // Given at their defaults' values, still given.
  EXPECT_TRUE(FlagGiven("max_things"));
  EXPECT_TRUE(FlagGiven("warmth"));
  EXPECT_TRUE(FlagGiven("loud"));
  EXPECT_FALSE(FlagGiven("untouched")) << "after --, arguments are not flags";
  EXPECT_EQ(absl::GetFlag(FLAGS_untouched), 5);

  Parse({"prog", "--warmth", "0.5"});
  EXPECT_TRUE(FlagGiven("warmth"));
  EXPECT_FALSE(FlagGiven("max_things")) << "each parse starts afresh";
}

}  // namespace
}  // namespace pagellm::cli
