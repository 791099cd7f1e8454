// Structured output through the engine on the real default model (SmolLM2-135M-Instruct, CPU
// backend): JSON Schema, JSON object, choice, regex and GBNF constraints end in complete output
// (parsed here by nlohmann::json and matched by PCRE2, which know nothing of the grammars),
// alone, batched, sampled and with n > 1; each masked row is independent of the batch; bad
// schemas, patterns and grammars are refused at admission. (common/structured/'s tests check
// the grammars themselves against Python's json, jsonschema and re, and Lark.)
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"
#include "worker/engine/engine.h"

namespace pagellm {
namespace {

using ::testing::AnyOf;
using ::testing::Eq;
using ::testing::HasSubstr;

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

constexpr char kPersonSchema[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 24},
    "age": {"type": "integer"},
    "city": {"enum": ["Paris", "London", "Tokyo"]},
    "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 3}
  },
  "required": ["name", "age", "city", "hobbies"]
})";

// Whether PCRE2, which knows nothing of the grammars, matches the whole of `text`.
bool FullMatch(const std::string& pattern, const std::string& text) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* re =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &error, &offset, nullptr);
  EXPECT_NE(re, nullptr) << pattern;
  if (re == nullptr) return false;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  const int rc =
      pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return rc >= 0;
}

struct Result {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  absl::Status error;
};
using Results = std::map<std::pair<std::string, int32_t>, Result>;

class StructuredOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::PathExists(testing::TestModelPath(kModel))) return;
    CpuBackendOptions o;
    o.threads = 2;
    o.num_kv_blocks = 256;
    auto m = testing::OpenModel(kModel, o);
    if (m.ok()) model_ = new testing::TestModel(*std::move(m));
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    PAGELLM_SKIP_WITHOUT_MODEL(kModel);
    ASSERT_NE(model_, nullptr);
    auto e = Engine::Create(model_->backend.get(), model_->tokenizer.get(), EngineOptions());
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
  }

  static std::vector<int32_t> Chat(const std::string& user) {
    const std::string prompt = "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
    return model_->tokenizer->Encode(prompt, /*add_special_tokens=*/true, /*parse_special=*/true);
  }
  static SamplingParams Schema(const std::string& schema, int max_tokens = 160) {
    SamplingParams p = testing::GreedyParams(max_tokens);
    p.ignore_eos = false;
    p.structured_output.kind = StructuredOutput::Kind::kJsonSchema;
    p.structured_output.json_schema = schema;
    return p;
  }

  Results Run() {
    Results r;
    std::vector<SequenceOutput> outs;
    for (int i = 0; i < 2000 && engine_->HasUnfinished(); ++i) {
      outs.clear();
      const absl::Status st = engine_->Step(&outs);
      EXPECT_TRUE(st.ok()) << st;
      for (const SequenceOutput& o : outs) {
        Result& x = r[{o.request_id, o.sample_index}];
        x.tokens.insert(x.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        x.text += o.text;
        x.finish = o.finish_reason;
        if (!o.error.ok()) x.error = o.error;
      }
    }
    EXPECT_FALSE(engine_->HasUnfinished());
    EXPECT_EQ(engine_->num_used_blocks(), 0);
    return r;
  }

  static void ExpectPerson(const Result& r) {
    ASSERT_TRUE(r.error.ok()) << r.error;
    ASSERT_EQ(r.finish, FinishReason::kStop) << r.text;
    const auto j = nlohmann::json::parse(r.text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << r.text;
    ASSERT_TRUE(j.is_object()) << r.text;
    EXPECT_EQ(j.size(), 4u) << r.text;
    EXPECT_TRUE(j["name"].is_string());
    EXPECT_LE(nlohmann::json(j["name"]).get<std::string>().size(), 24u * 4);
    EXPECT_TRUE(j["age"].is_number_integer()) << r.text;
    EXPECT_THAT(j["city"].get<std::string>(), AnyOf(Eq("Paris"), Eq("London"), Eq("Tokyo")));
    ASSERT_TRUE(j["hobbies"].is_array());
    EXPECT_LE(j["hobbies"].size(), 3u);
    // Ended by the grammar, not by an EOS token: the text is every token's.
    EXPECT_EQ(r.text, model_->tokenizer->Decode(r.tokens, /*skip_special=*/true));
    EXPECT_FALSE(model_->tokenizer->IsEndOfGeneration(r.tokens.back()));
  }

  static testing::TestModel* model_;
  std::unique_ptr<Engine> engine_;
};

testing::TestModel* StructuredOutputTest::model_ = nullptr;

TEST_F(StructuredOutputTest, JsonSchemaOutputParsesAndFollowsTheSchema) {
  ASSERT_TRUE(engine_
                  ->AddRequest("p", Chat("Describe a person living in a big city, as JSON."),
                               Schema(kPersonSchema))
                  .ok());
  ExpectPerson(Run()[{"p", 0}]);
}

TEST_F(StructuredOutputTest, MaskedRowsDoNotDependOnTheBatch) {
  ASSERT_TRUE(
      engine_->AddRequest("alone", Chat("A person as JSON, please."), Schema(kPersonSchema)).ok());
  const Result alone = Run()[{"alone", 0}];
  ExpectPerson(alone);
  // The same request among free-text ones, a json_object one and a second schema request.
  SamplingParams free = testing::GreedyParams(40);
  SamplingParams object = free;
  object.ignore_eos = false;
  object.structured_output.kind = StructuredOutput::Kind::kJsonObject;
  ASSERT_TRUE(engine_->AddRequest("free", Chat("Tell me a story."), free).ok());
  ASSERT_TRUE(
      engine_->AddRequest("batched", Chat("A person as JSON, please."), Schema(kPersonSchema))
          .ok());
  ASSERT_TRUE(engine_->AddRequest("object", Chat("Some JSON about cats."), object).ok());
  ASSERT_TRUE(
      engine_
          ->AddRequest("other", Chat("Describe someone from Tokyo in JSON."), Schema(kPersonSchema))
          .ok());
  Results r = Run();
  EXPECT_EQ((r[{"batched", 0}].tokens), alone.tokens);
  EXPECT_EQ((r[{"free", 0}].tokens.size()), 40u);
  ExpectPerson(r[{"other", 0}]);
  const Result& obj = r[{"object", 0}];
  ASSERT_TRUE(obj.error.ok()) << obj.error;
  if (obj.finish == FinishReason::kStop) {
    const auto j = nlohmann::json::parse(obj.text, nullptr, false);
    EXPECT_TRUE(j.is_object()) << obj.text;
  } else {
    EXPECT_EQ(obj.finish, FinishReason::kLength);
    EXPECT_EQ(obj.text.front(), '{');
  }
}

TEST_F(StructuredOutputTest, ChoiceAnswersWithOneOfTheChoices) {
  SamplingParams p = testing::GreedyParams(8);
  p.ignore_eos = false;
  p.structured_output.kind = StructuredOutput::Kind::kChoice;
  p.structured_output.choices = {"Positive", "Negative", "Neutral"};
  ASSERT_TRUE(
      engine_->AddRequest("c", Chat("Sentiment of: 'I love this film!' Answer in one word."), p)
          .ok());
  const Result r = Run()[{"c", 0}];
  EXPECT_THAT(r.text, AnyOf(Eq("Positive"), Eq("Negative"), Eq("Neutral")));
  EXPECT_EQ(r.finish, FinishReason::kStop);
}

TEST_F(StructuredOutputTest, SampledParallelSamplesAllParse) {
  SamplingParams p = Schema(kPersonSchema, 200);
  p.temperature = 1.0f;
  p.seed = 7;
  p.n = 4;
  ASSERT_TRUE(engine_->AddRequest("s", Chat("Invent a person. JSON only."), p).ok());
  Results r = Run();
  int finished = 0;
  for (int i = 0; i < 4; ++i) {
    const Result& x = r[{"s", i}];
    ASSERT_TRUE(x.error.ok()) << x.error;
    if (x.finish == FinishReason::kLength) continue;  // sampling may ramble inside a string
    ExpectPerson(x);
    ++finished;
  }
  EXPECT_GE(finished, 2);
}

TEST_F(StructuredOutputTest, AllowedTokenIdsAndLogitBiasSteerEverySample) {
  const std::vector<int32_t> words = model_->tokenizer->Encode(" red green", false, false);
  ASSERT_EQ(words.size(), 2u);
  SamplingParams allowed = testing::GreedyParams(12);
  allowed.ignore_eos = false;  // EOS is not listed: it cannot end the sample
  allowed.temperature = 1.0f;
  allowed.seed = 3;
  allowed.n = 3;
  allowed.allowed_token_ids = words;
  SamplingParams biased = testing::GreedyParams(6);
  biased.logit_bias = {{words[1], 100.0f}};
  SamplingParams both = testing::GreedyParams(8);  // a grammar and a list
  both.ignore_eos = false;
  both.structured_output = {.kind = StructuredOutput::Kind::kChoice, .choices = {"yes", "no"}};
  const std::vector<int32_t> yes = model_->tokenizer->Encode("yes", false, false);
  both.allowed_token_ids = yes;
  ASSERT_TRUE(engine_->AddRequest("allowed", Chat("Name colors."), allowed).ok());
  ASSERT_TRUE(engine_->AddRequest("biased", Chat("Name colors."), biased).ok());
  ASSERT_TRUE(engine_->AddRequest("both", Chat("Yes or no?"), both).ok());
  Results r = Run();
  for (int i = 0; i < 3; ++i) {
    const Result& x = r[{"allowed", i}];
    EXPECT_EQ(x.tokens.size(), 12u);
    for (int32_t t : x.tokens) EXPECT_THAT(t, AnyOf(Eq(words[0]), Eq(words[1])));
  }
  EXPECT_EQ((r[{"biased", 0}].tokens), std::vector<int32_t>(6, words[1]));
  EXPECT_EQ((r[{"both", 0}].text), "yes");
  EXPECT_EQ((r[{"both", 0}].finish), FinishReason::kStop);
}

TEST_F(StructuredOutputTest, RegexOutputIsAFullMatch) {
  SamplingParams phone = testing::GreedyParams(40);
  phone.ignore_eos = false;
  phone.structured_output.kind = StructuredOutput::Kind::kRegex;
  phone.structured_output.regex = R"(\(\d{3}\) \d{3}-\d{4})";
  SamplingParams date = phone;
  date.structured_output.regex = R"((Mon|Tues|Wednes)day, [A-Z][a-z]{2,8} \d{1,2}(st|nd|rd|th)?)";
  date.temperature = 1.0f;
  date.seed = 3;
  date.n = 3;
  ASSERT_TRUE(engine_->AddRequest("phone", Chat("Give me a phone number."), phone).ok());
  ASSERT_TRUE(engine_->AddRequest("date", Chat("When shall we meet?"), date).ok());
  Results r = Run();
  const Result& p = r[{"phone", 0}];
  ASSERT_TRUE(p.error.ok()) << p.error;
  EXPECT_EQ(p.finish, FinishReason::kStop);
  EXPECT_TRUE(FullMatch(phone.structured_output.regex, p.text)) << p.text;
  for (int i = 0; i < 3; ++i) {
    const Result& d = r[{"date", i}];
    ASSERT_TRUE(d.error.ok()) << d.error;
    if (d.finish == FinishReason::kLength) continue;  // still inside the pattern
    EXPECT_TRUE(FullMatch(date.structured_output.regex, d.text)) << d.text;
  }
}

TEST_F(StructuredOutputTest, GbnfGrammarOutputIsAMatchOfRoot) {
  SamplingParams p = testing::GreedyParams(40);
  p.ignore_eos = false;
  p.temperature = 0.8f;
  p.seed = 11;
  p.n = 3;
  p.structured_output.kind = StructuredOutput::Kind::kGrammar;
  p.structured_output.grammar = R"(root ::= answer ", " count " " unit
answer ::= "yes" | "no"     # then a number
count ::= [1-9] [0-9]{0,2}
unit ::= ("apple" | "pear") "s"?)";
  ASSERT_TRUE(engine_->AddRequest("g", Chat("Do you have fruit? How many?"), p).ok());
  Results r = Run();
  for (int i = 0; i < 3; ++i) {
    const Result& x = r[{"g", i}];
    ASSERT_TRUE(x.error.ok()) << x.error;
    EXPECT_EQ(x.finish, FinishReason::kStop) << x.text;
    EXPECT_TRUE(FullMatch("(yes|no), [1-9][0-9]{0,2} (apple|pear)s?", x.text)) << x.text;
  }
}

TEST_F(StructuredOutputTest, BadSchemasAndBeamSearchAreRefusedAtAdmission) {
  auto constrained = [](StructuredOutput::Kind kind, std::string text) {
    SamplingParams p = testing::GreedyParams(8);
    p.structured_output.kind = kind;
    (kind == StructuredOutput::Kind::kRegex ? p.structured_output.regex
                                            : p.structured_output.grammar) = std::move(text);
    return p;
  };
  const std::vector<std::pair<SamplingParams, std::string>> cases = {
      {Schema(R"({"type": "string", "pattern": "^(a)\\1$"})"), "backreferences are not supported"},
      {constrained(StructuredOutput::Kind::kRegex, "a(?=b)"),
       "lookaround is not supported at offset 1"},
      {constrained(StructuredOutput::Kind::kGrammar, "root ::= root \"a\" | \"a\""),
       "'root' refers to itself before matching anything"},
      // Constraints no finite output satisfies (found by structured_grammar_fuzz).
      {constrained(StructuredOutput::Kind::kGrammar, "root ::= expr\nexpr ::= \"(\" expr \")\""),
       "no output can complete it"},
      {Schema(R"({"$defs": {"A": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
                                  "required": ["a"]}}, "$ref": "#/$defs/A"})"),
       "no output can complete it"},
  };
  for (const auto& [params, message] : cases) {
    const absl::Status st = engine_->AddRequest("x", Chat("hi"), params);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(st.message(), HasSubstr(message));
  }
  EXPECT_EQ(engine_->AddRequest("y", Chat("hi"), Schema("{not json")).code(),
            absl::StatusCode::kInvalidArgument);
  SamplingParams beam = Schema(R"({"type": "object"})");
  beam.beam_width = 2;
  EXPECT_EQ(engine_->AddRequest("z", Chat("hi"), beam).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(engine_->HasUnfinished());
}

}  // namespace
}  // namespace pagellm
