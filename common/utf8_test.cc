#include "common/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

const std::string kFffd(kReplacementChar);

struct Case {
  std::string in;
  std::string sanitized;
};

class SanitizeUtf8Test : public ::testing::TestWithParam<Case> {};

TEST_P(SanitizeUtf8Test, ReplacesEachMaximalSubpart) {
  EXPECT_EQ(SanitizeUtf8(GetParam().in), GetParam().sanitized);
  EXPECT_EQ(IsValidUtf8(GetParam().in), GetParam().in == GetParam().sanitized);
}

// Expected values follow Unicode's "substitution of maximal subparts" (Table 3-8 and the
// examples around it), which is also what Python's bytes.decode(errors="replace") produces.
INSTANTIATE_TEST_SUITE_P(
    Cases, SanitizeUtf8Test,
    ::testing::Values(Case{"", ""}, Case{"abc", "abc"}, Case{"\xC3\xA9", "\xC3\xA9"},
                      Case{"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
                      Case{"\xEF\xBF\xBD", "\xEF\xBF\xBD"},
                      Case{"\x80", kFffd},                                      // lone continuation
                      Case{"\xC0\xAF", kFffd + kFffd},                          // overlong lead
                      Case{"\xE0\x80\xAF", kFffd + kFffd + kFffd},              // overlong 3-byte
                      Case{"\xED\xA0\x80", kFffd + kFffd + kFffd},              // surrogate
                      Case{"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},  // > U+10FFFF
                      Case{"\xF0\x9F\x98", kFffd},  // truncated at the end
                      Case{"\xF0\x9F\x98"
                           "a",
                           kFffd + "a"},  // truncated in the middle
                      Case{"\xE4\xBD"
                           "\xE4\xBD\xA0",
                           kFffd + "\xE4\xBD\xA0"},
                      Case{"a\xFF"
                           "b\xFE",
                           "a" + kFffd + "b" + kFffd},
                      Case{"\xF5\x80", kFffd + kFffd}));

TEST(AppendSanitizedUtf8Test, HoldsBackAnIncompleteTailUnlessAtEnd) {
  std::string out;
  EXPECT_EQ(AppendSanitizedUtf8("ab\xE4\xBD", /*at_end=*/false, &out), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(AppendSanitizedUtf8("ab\xE4\xBD", /*at_end=*/true, &out), 4u);
  EXPECT_EQ(out, "ab" + kFffd);
  out.clear();
  // A tail that can no longer become valid is replaced at once.
  EXPECT_EQ(AppendSanitizedUtf8("\xE4"
                                "a",
                                /*at_end=*/false, &out),
            2u);
  EXPECT_EQ(out, kFffd + "a");
}

TEST(Utf8CharLenTest, FollowsTheLeadByte) {
  const std::string s = "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80";
  EXPECT_EQ(Utf8CharLen(s, 0), 1u);
  EXPECT_EQ(Utf8CharLen(s, 1), 2u);
  EXPECT_EQ(Utf8CharLen(s, 3), 3u);
  EXPECT_EQ(Utf8CharLen(s, 6), 4u);
}

TEST(AppendCodepointTest, EncodesEachLength) {
  std::string out;
  for (uint32_t cp : {0x41u, 0xE9u, 0x4F60u, 0x1F600u}) AppendCodepoint(cp, &out);
  EXPECT_EQ(out, "A\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace pagellm
