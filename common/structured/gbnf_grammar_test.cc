// GBNF grammars against the Lark library's Earley parser: for each fixture grammar, the compiled
// grammar accepts exactly the strings Lark parses with the same grammar (translated rule for rule
// by tools/fixtures/make_structured_fixture.py), over generated strings and their edits. Then
// what is refused, and the limits.
#include "common/structured/gbnf_grammar.h"

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

TEST(GbnfGrammarTest, AcceptsExactlyWhatLarkParses) {
  const auto fixture = Fixture();
  if (!fixture) GTEST_SKIP() << "no " << kFixture << " (tools/fixtures/make_structured_fixture.py)";
  int grammars = 0, valid = 0, invalid = 0;
  for (const auto& g : (*fixture)["grammars"]) {
    SCOPED_TRACE(g["name"].get<std::string>());
    ExpectVerdicts(Compile(GbnfGrammar(g["grammar"].get<std::string>())), g["cases"], &valid,
                   &invalid);
    ++grammars;
  }
  EXPECT_GE(grammars, 5);
  EXPECT_GT(valid, 300);
  EXPECT_GT(invalid, 300);
}

TEST(GbnfGrammarTest, LlamaCppLayoutReadsTheSame) {
  // One definition per line, alternatives continued inside parentheses, comments anywhere.
  auto g = Compile(GbnfGrammar(R"(# a yes/no answer with a reason
root ::= answer ", because " reason "."   # the whole output
answer ::= (
    "yes" |
    "no"
)
reason ::= [a-z ]{1,20})"));
  EXPECT_TRUE(Accepts(GrammarMatcher(g), "yes, because it rains."));
  EXPECT_TRUE(Accepts(GrammarMatcher(g), "no, because x."));
  EXPECT_FALSE(Accepts(GrammarMatcher(g), "maybe, because x."));
  EXPECT_FALSE(Accepts(GrammarMatcher(g), "yes, because ."));
}

TEST(GbnfGrammarTest, LongTailChainsFinishAndEndlessRulesCannot) {
  // 1,000 rules, each calling the next last: no stack growth, so it must finish.
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 1000; ++i) absl::StrAppend(&chain, "r", i, " ::= \"a\" r", i + 1, "\n");
  absl::StrAppend(&chain, "r1000 ::= \"b\"\n");
  auto g = Compile(GbnfGrammar(chain));
  EXPECT_TRUE(g->can_finish());
  EXPECT_TRUE(Accepts(GrammarMatcher(g), std::string(1000, 'a') + "b"));
  EXPECT_FALSE(Accepts(GrammarMatcher(g), std::string(999, 'a') + "b"));
  // A rule that can never finish: no output completes the grammar (the engine refuses it).
  EXPECT_FALSE(Compile(GbnfGrammar("root ::= expr\nexpr ::= \"(\" expr \")\""))->can_finish());
  EXPECT_TRUE(Compile(GbnfGrammar("root ::= \"(\" root \")\" | \"x\""))->can_finish());
}

TEST(GbnfGrammarTest, BadGrammarsAreRefusedByNameOrOffset) {
  struct Case {
    const char* grammar;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"start ::= \"a\"", "no rule named root"},
           {"root ::= item", "rule 'item' is not defined"},
           {"root ::= \"a\"\nroot ::= \"b\"", "rule 'root' is defined twice at offset 13"},
           {"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", "refers to itself"},
           {"root ::= a\na ::= b? a \"x\"\nb ::= \"y\"", "refers to itself"},
           {"root = \"a\"", "expected ::= after 'root' at offset 5"},
           {"root ::= \"abc", "unterminated string at offset 9"},
           {"root ::= [abc", "unterminated character class"},
           {"root ::= [z-a]", "bad character range"},
           {"root ::= []", "matches no character"},
           {"root ::= (\"a\"", "missing ) at offset 9"},
           {"root ::= \"a\")", "unbalanced parenthesis at offset 12"},
           {"root ::= \"a\"{3,2}", "min repeat greater than max repeat"},
           {"root ::= \"a\"{1001}", "repeat bound over 1000"},
           {"root ::= \"a\"{}", "a repeat needs a count"},
           {"root ::= \"\\q\"", "bad escape \\q"},
           {"root ::= \"\\ud800\"", "surrogate"},
           {"root ::= \"a\" @", "unexpected '@'"},
           {"root ::= \"\xff\"", "not valid UTF-8"},
       }) {
    ExpectRefused(GbnfGrammar(c.grammar), c.message, c.grammar);
  }
}

TEST(GbnfGrammarTest, NestingAndSizeAreBounded) {
  const std::string deep = std::string(64, '(') + "\"a\"" + std::string(64, ')');
  EXPECT_TRUE(Accepts(GrammarMatcher(Compile(GbnfGrammar("root ::= " + deep))), "a"));
  auto too_deep = GbnfGrammar("root ::= (" + deep + ")");
  ASSERT_FALSE(too_deep.ok());
  EXPECT_THAT(too_deep.status().message(), HasSubstr("groups nest deeper than 64"));

  std::string huge = "root ::= x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x\n";
  absl::StrAppend(&huge, "x ::= ([a-z]{1000}){1000}\n");  // one rule: fine
  EXPECT_TRUE(GbnfGrammar(huge).ok());
  std::string many = "root ::=";
  for (int i = 0; i < 300; ++i) absl::StrAppend(&many, " [a-z]{1000}");
  auto refused = GbnfGrammar(many);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("would exceed"));
}

}  // namespace
}  // namespace pagellm::structured
