// Regex grammars against Python's re module: for each fixture pattern, the grammar accepts
// exactly the strings re.fullmatch (re.ASCII) accepts, over hypothesis-drawn full matches and
// their edits (tools/fixtures/make_structured_fixture.py). Then what is refused, the JSON-string
// spelling, and the limits.
#include "common/structured/regex_grammar.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/structured/grammar_matcher.h"
#include "common/structured/grammar_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm::structured {
namespace {

using ::pagellm::structured::test_util::Accepts;
using ::pagellm::structured::test_util::Compile;
using ::pagellm::structured::test_util::ExpectRefused;
using ::pagellm::structured::test_util::ExpectVerdicts;
using ::pagellm::structured::test_util::Fixture;
using ::pagellm::structured::test_util::kFixture;
using ::testing::HasSubstr;

bool Matches(std::string_view pattern, std::string_view text) {
  return Accepts(GrammarMatcher(Compile(RegexGrammar(pattern))), text);
}

TEST(RegexGrammarTest, AcceptsExactlyWhatPythonFullmatchAccepts) {
  const auto fixture = Fixture();
  if (!fixture) GTEST_SKIP() << "no " << kFixture << " (tools/fixtures/make_structured_fixture.py)";
  int patterns = 0, valid = 0, invalid = 0;
  for (const auto& r : (*fixture)["regexes"]) {
    const std::string pattern = r["pattern"].get<std::string>();
    SCOPED_TRACE(absl::StrCat("pattern ", absl::CHexEscape(pattern)));
    ExpectVerdicts(Compile(RegexGrammar(pattern)), r["cases"], &valid, &invalid);
    ++patterns;
  }
  EXPECT_GE(patterns, 25);
  EXPECT_GT(valid, 1000);
  EXPECT_GT(invalid, 1000);
}

TEST(RegexGrammarTest, UnsupportedOrBrokenPatternsAreRefusedWithTheOffset) {
  struct Case {
    const char* pattern;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"(a)\\1", "backreferences are not supported at offset 3"},
           {"(?P<x>a)(?P=x)", "backreferences are not supported at offset 8"},
           {"a(?=b)", "lookaround is not supported at offset 1"},
           {"(?<!a)b", "lookaround is not supported"},
           {"\\bword\\b", "word boundaries (\\b) are not supported at offset 0"},
           {"(?i)abc", "inline flags"},
           {"a*+", "possessive quantifiers are not supported"},
           {"(?>a)", "atomic groups are not supported"},
           {"a^b", "anchors only at the start or end"},
           {"(^a)", "anchors only at the start or end"},
           {"a$b", "$ or \\Z before the end"},
           {"*a", "nothing to repeat at offset 0"},
           {"^*", "nothing to repeat at offset 1"},
           {"a**", "multiple repeat at offset 2"},
           {"a{2}{3}", "multiple repeat at offset 4"},
           {"a{3,2}", "min repeat greater than max repeat"},
           {"a{1001}", "repeat bound over 1000"},
           {"a{0,99999}", "repeat bound over 1000"},
           {"(ab", "missing ), unterminated subpattern at offset 0"},
           {"ab)", "unbalanced parenthesis at offset 2"},
           {"[abc", "unterminated character set"},
           {"[z-a]", "bad character range"},
           {"[\\d-z]", "bad character range"},
           {"[^\\s\\S]", "matches no character"},
           {"\\q", "bad escape \\q"},
           {"\\x4", "2 hex digits expected"},
           {"\\ud800", "surrogate"},
           {"\\U00110000", "above U+10FFFF"},
           {"a\\", "bad escape (end of pattern)"},
           {"\\012", "octal escapes are not supported"},
           {"\xff", "not valid UTF-8"},
       }) {
    ExpectRefused(RegexGrammar(c.pattern), c.message, c.pattern);
  }
}

TEST(RegexGrammarTest, NestingAndSizeAreBounded) {
  const std::string deep = std::string(64, '(') + "a" + std::string(64, ')');
  EXPECT_TRUE(Matches(deep, "a"));
  auto too_deep = RegexGrammar("(" + deep + ")");
  ASSERT_FALSE(too_deep.ok());
  EXPECT_THAT(too_deep.status().message(), HasSubstr("groups nest deeper than 64"));

  // Repeats of repeats cost the sum of their bounds, not the product.
  auto nested = RegexGrammar("((a{1000}){1000}){1000}");
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_LT(nested->num_elements(), 20000u);

  // An empty-matching body repeated (left recursion if emitted as written) is the repeat of
  // its non-empty part, and deep chains of them stay linear.
  EXPECT_TRUE(Matches("(a?)*", ""));
  EXPECT_TRUE(Matches("(a?)*", "aaaa"));
  EXPECT_TRUE(Matches("((a|)(b|)(c|))+", "cab"));
  EXPECT_FALSE(Matches("((a|)(b|)(c|))+", "cad"));
  std::string chain;
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&chain, "(x?y?)*");
  auto long_chain = RegexGrammar(chain);
  ASSERT_TRUE(long_chain.ok()) << long_chain.status();
  EXPECT_LT(long_chain->num_elements(), 200000u);

  // Too large for the grammar limits: InvalidArgument, not a crash.
  std::string huge;
  for (int i = 0; i < 300; ++i) absl::StrAppend(&huge, "[a-z]{1000}");
  auto refused = RegexGrammar(huge);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("would exceed"));
}

TEST(RegexGrammarTest, JsonStringSpellingEscapesWhatJsonMust) {
  GrammarBuilder b;
  auto rule = AddRegexRule("[\"\\\\\\n\\x01a\\u00e9]+", RegexText::kJsonString, &b);
  ASSERT_TRUE(rule.ok()) << rule.status();
  auto g = Compile(std::move(b).Build(*rule));
  for (const char* ok :
       {"\\\"", "\\\\", "\\n", "\\u000a", "\\u000A", "\\u0001", "a\xc3\xa9\\\"a"}) {
    EXPECT_TRUE(Accepts(GrammarMatcher(g), ok)) << ok;
  }
  for (const char* bad : {"\"", "\\", "\n", "\x01", "\\u00e9", "\\t", "b", "\\u0002"}) {
    EXPECT_FALSE(Accepts(GrammarMatcher(g), bad)) << absl::CHexEscape(bad);
  }
}

}  // namespace
}  // namespace pagellm::structured
