// The structured-output grammars against independent verdicts: Python's json module and the
// jsonschema package decide, over generated and mutated documents, what the JSON grammars must
// accept (tools/fixtures/make_structured_fixture.py); the token mask against testing each
// token alone; and the limits.
#include "common/structured/grammar_matcher.h"

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/structured/grammar_test_util.h"
#include "common/structured/json_schema_grammar.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagellm::structured {
namespace {

using ::pagellm::structured::test_util::Accepts;
using ::pagellm::structured::test_util::ByteVocab;
using ::pagellm::structured::test_util::Compile;
using ::pagellm::structured::test_util::ExpectRefused;
using ::pagellm::structured::test_util::Fixture;
using ::pagellm::structured::test_util::Hex;
using ::pagellm::structured::test_util::kFixture;
using ::testing::HasSubstr;

TEST(JsonGrammarTest, AnyObjectAcceptsExactlyWhatPythonJsonAccepts) {
  const auto fixture = Fixture();
  if (!fixture) GTEST_SKIP() << "no " << kFixture << " (tools/fixtures/make_structured_fixture.py)";
  auto g = Compile(JsonObjectGrammar());
  int valid = 0, n = 0;
  for (const auto& c : (*fixture)["json"]) {
    const std::string text = Hex(c);
    EXPECT_EQ(Accepts(GrammarMatcher(g), text), c["valid"].get<bool>())
        << "case " << n << ": " << absl::CHexEscape(text);
    valid += c["valid"].get<bool>();
    ++n;
  }
  EXPECT_GT(valid, 500);
  EXPECT_GT(n - valid, 1000);
}

TEST(JsonGrammarTest, SchemaGrammarsAcceptOnlyValidDocumentsAndEveryCanonicalOne) {
  const auto fixture = Fixture();
  if (!fixture) GTEST_SKIP() << "no " << kFixture << " (tools/fixtures/make_structured_fixture.py)";
  for (const auto& s : (*fixture)["schemas"]) {
    SCOPED_TRACE(s["name"].get<std::string>());
    auto g = Compile(JsonSchemaGrammar(s["schema"].get<std::string>()));
    int accepted = 0, rejected_invalid = 0;
    for (const auto& c : s["cases"]) {
      const std::string text = Hex(c);
      const bool valid = c["valid"].get<bool>();
      const bool accepts = Accepts(GrammarMatcher(g), text);
      if (accepts) {
        EXPECT_TRUE(valid) << "accepted an invalid document: " << absl::CHexEscape(text);
      } else if (valid && c["canonical"].get<bool>()) {
        ADD_FAILURE() << "refused a valid document in the schema's order: "
                      << absl::CHexEscape(text);
      }
      accepted += accepts;
      rejected_invalid += !accepts && !valid;
    }
    EXPECT_GE(accepted, 150);  // every canonical instance
    EXPECT_GT(rejected_invalid, 100);
  }
}

TEST(JsonGrammarTest, WhitespaceRunsAreBounded) {
  auto g = Compile(JsonObjectGrammar());
  EXPECT_TRUE(Accepts(GrammarMatcher(g), "{" + std::string(16, ' ') + "}"));
  EXPECT_FALSE(Accepts(GrammarMatcher(g), "{" + std::string(17, ' ') + "}"));
  EXPECT_TRUE(
      Accepts(GrammarMatcher(g), "{\n  \"a\": [1, 2.5e-3, -0, true, null, \"\\u00e9\"]\n}"));
  EXPECT_FALSE(Accepts(GrammarMatcher(g), " {}"));
  EXPECT_FALSE(Accepts(GrammarMatcher(g), "[]"));
}

TEST(JsonGrammarTest, ChoiceIsOneOfTheStringsExactly) {
  auto g = Compile(ChoiceGrammar({"yes", "no", "not sure", "n"}));
  for (const char* ok : {"yes", "no", "not sure", "n"}) EXPECT_TRUE(Accepts(GrammarMatcher(g), ok));
  for (const char* bad : {"", "ye", "yess", "not", "No"}) {
    EXPECT_FALSE(Accepts(GrammarMatcher(g), bad)) << bad;
  }
  GrammarMatcher m(g);
  ASSERT_TRUE(m.Accept('n').ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.MustEnd());  // "no", "not sure" go on
  ASSERT_TRUE(m.Accept('o').ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.Accept('!').ok());
  EXPECT_TRUE(m.CanEnd());  // a refused token leaves the state as it was
}

TEST(JsonGrammarTest, UnsupportedOrBrokenSchemasAreRefusedByName) {
  struct Case {
    const char* schema;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"type": "string", "pattern": "(a)\\1"})",
            "pattern: regex: backreferences are not supported"},
           {R"({"type": "string", "pattern": "a+", "maxLength": 3})",
            "maxLength next to pattern is not supported"},
           {R"({"type": "string", "format": "hostname"})", "format 'hostname' is not supported"},
           {R"({"properties": {"n": {"type": "number", "minimum": 0.5}}})",
            "/properties/n': minimum on a number must be a whole number"},
           {R"({"type": "number", "exclusiveMinimum": 3, "maximum": 3})",
            "no number lies within the bounds"},
           {R"({"type": "integer", "minimum": 5, "exclusiveMaximum": 5})",
            "no integer lies within the bounds"},
           {R"({"type": "integer", "maximum": 1e300})", "maximum must be a number of magnitude"},
           {R"({"type": "integer", "multipleOf": 2})", "keyword 'multipleOf' is not supported"},
           {R"({"type": "object", "properties": {}, "required": ["x"]})", "required property 'x'"},
           {R"({"$ref": "#/$defs/missing"})", "does not name"},
           {R"({"$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}]}}, "$ref": "#/$defs/A"})",
            "refers to itself before matching anything"},
           {R"({"type": "array", "maxItems": 100000})", "maxItems must be an integer"},
           {R"({"type": "array", "prefixItems": {"type": "integer"}})",
            "prefixItems must be a list of 1 to 1024 schemas"},
           {R"({"prefixItems": [{"type": "integer"}], "items": false, "minItems": 2})",
            "no array fits prefixItems, items and minItems"},
           {R"({"type": "unicorn"})", "unknown type 'unicorn'"},
           {R"({"type": "object",)", "not valid JSON"},
           {"false", "matches nothing"},
       }) {
    ExpectRefused(JsonSchemaGrammar(c.schema), c.message, c.schema);
  }
}

TEST(JsonGrammarTest, IntegerBoundsAcceptExactlyTheIntegersWithin) {
  struct Case {
    const char* bounds;
    int64_t lo, hi;  // inclusive; the sweep is [-1100, 1100]
  };
  for (const Case& c : std::vector<Case>{{R"("minimum": 0, "maximum": 100)", 0, 100},
                                         {R"("minimum": -7, "maximum": 7)", -7, 7},
                                         {R"("exclusiveMinimum": -1000, "maximum": -7)", -999, -7},
                                         {R"("minimum": 9.5, "exclusiveMaximum": 1000)", 10, 999},
                                         {R"("minimum": 99)", 99, 1100},
                                         {R"("maximum": -100)", -1100, -100},
                                         {R"("minimum": 0, "maximum": 0)", 0, 0},
                                         {R"("minimum": 1, "exclusiveMinimum": 3)", 4, 1100}}) {
    SCOPED_TRACE(c.bounds);
    auto g = Compile(JsonSchemaGrammar(absl::StrCat(R"({"type": "integer", )", c.bounds, "}")));
    for (int64_t v = -1100; v <= 1100; ++v) {
      ASSERT_EQ(Accepts(GrammarMatcher(g), std::to_string(v)), v >= c.lo && v <= c.hi) << v;
    }
    EXPECT_FALSE(Accepts(GrammarMatcher(g), "-0"));
    EXPECT_FALSE(Accepts(GrammarMatcher(g), "007"));
    EXPECT_FALSE(Accepts(GrammarMatcher(g), "1.0"));
  }
  // Wide bounds: the extremes and their neighbours.
  auto g = Compile(JsonSchemaGrammar(
      R"({"type": "integer", "minimum": -4000000000000000000, "maximum": 123456789012345678})"));
  EXPECT_TRUE(Accepts(GrammarMatcher(g), "-4000000000000000000"));
  EXPECT_FALSE(Accepts(GrammarMatcher(g), "-4000000000000000001"));
  EXPECT_TRUE(Accepts(GrammarMatcher(g), "123456789012345678"));
  EXPECT_FALSE(Accepts(GrammarMatcher(g), "123456789012345679"));
  EXPECT_TRUE(Accepts(GrammarMatcher(g), "99999999999999999"));
}

TEST(JsonGrammarTest, DeepNestingStopsAtTheStackLimitWithoutFailing) {
  auto g = Compile(JsonObjectGrammar(), nullptr, MatcherLimits{.max_stack_depth = 64});
  GrammarMatcher m(g);
  std::vector<uint64_t> mask(m.vocab().mask_words());
  auto allowed = [&](char c) {
    m.FillNextTokenMask(absl::MakeSpan(mask));
    return ((mask[static_cast<uint8_t>(c) >> 6] >> (c & 63)) & 1) != 0;
  };
  // {"a":[[[[... as deep as the grammar lets it go; then it must still be able to close.
  for (char c : std::string_view("{\"a\":")) ASSERT_TRUE(m.Accept(static_cast<uint8_t>(c)).ok());
  int depth = 0;
  while (allowed('[')) {
    ASSERT_TRUE(m.Accept('[').ok());
    ASSERT_LT(++depth, 64);
  }
  EXPECT_GT(depth, 10);
  int steps = 0;
  while (!m.MustEnd()) {
    ASSERT_LT(++steps, 200);
    const char* pick = "1]}";
    while (*pick != 0 && !allowed(*pick)) ++pick;
    ASSERT_NE(*pick, 0) << "a dead end after " << depth << " brackets and " << steps << " steps";
    ASSERT_TRUE(m.Accept(static_cast<uint8_t>(*pick)).ok());
  }
  EXPECT_GE(steps, depth + 1);  // [1], the brackets, the brace
  EXPECT_LE(steps, depth + 2);
}

TEST(JsonGrammarTest, NodeLimitIsResourceExhausted) {
  auto g = Compile(JsonObjectGrammar(), nullptr, MatcherLimits{.max_nodes = 40});
  GrammarMatcher m(g);
  absl::Status st;
  for (char c : std::string_view(R"({"a":[{"b":[{"c":[[[[1]]]]}]}]})")) {
    st = m.Accept(static_cast<uint8_t>(c));
    if (!st.ok()) break;
  }
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_TRUE(g->exhausted());
}

// A vocabulary of multi-byte pieces, as BPE makes them: JSON punctuation runs, words with
// spaces, digits, partial and whole UTF-8 characters, escapes.
std::vector<std::string> Pieces() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  const std::vector<std::string> atoms = {"{",
                                          "}",
                                          "[",
                                          "]",
                                          "\"",
                                          ":",
                                          ",",
                                          " ",
                                          "\n",
                                          "  ",
                                          "\\",
                                          "\\n",
                                          "\\u00",
                                          "true",
                                          "false",
                                          "null",
                                          "name",
                                          "age",
                                          "tags",
                                          "id",
                                          "label",
                                          "0",
                                          "1",
                                          "12",
                                          "-",
                                          ".",
                                          "e+",
                                          "\xc3",
                                          "\xa9",
                                          "\xc3\xa9",
                                          "\xe4\xb8\xad",
                                          "\xf0\x9f",
                                          "\x98\x80",
                                          "ok",
                                          "error",
                                          "x"};
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string p;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k) p += atoms[rng() % atoms.size()];
    pieces.push_back(p);
  }
  return pieces;
}

TEST(GrammarMatcherTest, MaskIsExactlyTheTokensThatContinueTheOutput) {
  static const auto* kPieces = new std::vector<std::string>(Pieces());
  auto vocab = *TokenVocabulary::Create(
      static_cast<int32_t>(kPieces->size()) + 1,  // the last id: a special token, never allowed
      [](int32_t id) {
        return id < static_cast<int32_t>(kPieces->size()) ? std::string_view((*kPieces)[id])
                                                          : std::string_view("<|end|>");
      },
      [](int32_t id) { return id < static_cast<int32_t>(kPieces->size()); });
  const std::string schema =
      R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
          "tags": {"type": "array", "items": {"enum": ["ok", "error", 12]}}},
          "required": ["name", "tags"]})";
  for (auto grammar : {JsonObjectGrammar(), JsonSchemaGrammar(schema)}) {
    auto g = Compile(std::move(grammar), vocab);
    GrammarMatcher m(g);
    std::vector<uint64_t> mask(vocab->mask_words());
    std::mt19937 rng(11);
    for (int step = 0; step < 40 && !m.MustEnd(); ++step) {
      m.FillNextTokenMask(absl::MakeSpan(mask));
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < vocab->vocab_size(); ++t) {
        GrammarMatcher copy = m;
        const bool continues = copy.Accept(t).ok();
        ASSERT_EQ(((mask[t >> 6] >> (t & 63)) & 1) != 0, continues)
            << "step " << step << " token " << t << " '"
            << absl::CHexEscape(std::string(vocab->TokenBytes(t))) << "'";
        if (continues) allowed.push_back(t);
      }
      ASSERT_FALSE(allowed.empty()) << "step " << step;
      ASSERT_TRUE(m.Accept(allowed[rng() % allowed.size()]).ok());
    }
    EXPECT_GT(g->stats().masks_computed, 5);
  }
}

TEST(GrammarMatcherTest, MatchersOfOneGrammarShareMasks) {
  auto g = Compile(JsonSchemaGrammar(R"({"type": "object", "properties": {"a": {"type":
      "boolean"}}, "required": ["a"]})"));
  std::vector<uint64_t> mask(g->vocab().mask_words());
  for (int i = 0; i < 3; ++i) {
    GrammarMatcher m(g);
    for (char c : std::string_view("{\"a\":")) {
      m.FillNextTokenMask(absl::MakeSpan(mask));
      ASSERT_TRUE(m.Accept(static_cast<uint8_t>(c)).ok());
    }
    EXPECT_FALSE(m.CanEnd());
    ASSERT_TRUE(Accepts(m, "true}"));
  }
  EXPECT_EQ(g->stats().masks_computed, 5);
  EXPECT_EQ(g->stats().masks_cached, 10);
}

}  // namespace
}  // namespace pagellm::structured
