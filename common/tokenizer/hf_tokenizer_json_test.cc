#include "common/tokenizer/hf_tokenizer_json.h"

#include <string>
#include <vector>

#include "common/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Ids = std::vector<int32_t>;

constexpr char kByteLevelJson[] = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 6, "content": "<|bos|>", "special": true, "lstrip": false, "rstrip": false,
     "normalized": false, "single_word": false},
    {"id": 7, "content": "<x>", "special": false, "lstrip": false, "rstrip": false,
     "normalized": false, "single_word": false}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": true},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [],
    "special_tokens": {"<|bos|>": {"id": "<|bos|>", "ids": [6], "tokens": ["<|bos|>"]}}},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false,
    "vocab": {"a": 0, "b": 1, "1": 2, "ab": 3, "Ġ": 4, "Ġab": 5, "<|bos|>": 6},
    "merges": ["a b", ["Ġ", "ab"]]}
})";

TEST(HfTokenizerJsonTest, ReadsAByteLevelTokenizer) {
  auto spec = VocabSpecFromHfTokenizerJson(kByteLevelJson);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model, VocabModel::kByteLevelBpe);
  EXPECT_EQ(spec->tokens.size(), 8u);
  EXPECT_EQ(spec->token_types[6], TokenType::kControl);
  EXPECT_EQ(spec->token_types[7], TokenType::kUserDefined);
  EXPECT_EQ(spec->bos_id, 6);
  EXPECT_TRUE(spec->add_bos);
  EXPECT_EQ(spec->pre_patterns.size(), 2u);

  auto tok = Tokenizer::Create(*std::move(spec));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->Encode("ab ab11<x>", true, false), (Ids{6, 3, 5, 2, 2, 7}));
  EXPECT_EQ((*tok)->Decode({6, 3, 5, 7}, true), "ab ab<x>");
}

constexpr char kLegacySpmJson[] = R"({
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true},
    {"id": 1, "content": "<s>", "special": true},
    {"id": 2, "content": "</s>", "special": true}],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true,
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0xC3>": 3, "<0xA9>": 4, "▁": 5, "a": 6,
              "▁a": 7},
    "merges": ["▁ a"]}
})";

TEST(HfTokenizerJsonTest, ReadsALegacySentencePieceTokenizer) {
  auto spec = VocabSpecFromHfTokenizerJson(kLegacySpmJson);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model, VocabModel::kSentencePieceBpe);
  EXPECT_TRUE(spec->add_space_prefix);
  EXPECT_FALSE(spec->space_prefix_first_only);
  EXPECT_EQ(spec->unk_id, 0);
  EXPECT_EQ(spec->token_types[0], TokenType::kUnknown);
  EXPECT_EQ(spec->token_types[3], TokenType::kByte);
  EXPECT_EQ(spec->eos_id, 2);  // by name

  auto tok = Tokenizer::Create(*std::move(spec));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->Encode("a é", true, false), (Ids{1, 7, 5, 3, 4}));
  EXPECT_EQ((*tok)->Decode({1, 7, 5, 3, 4}, true), "a é");
}

TEST(HfTokenizerJsonTest, ReadsMetaspaceWithPrependSchemeFirst) {
  std::string json = kLegacySpmJson;
  json.replace(json.find("\"normalizer\""),
               json.find("\"post_processor\"") - json.find("\"normalizer\""),
               R"("normalizer": null, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁",
               "prepend_scheme": "first", "split": false}, )");
  auto spec = VocabSpecFromHfTokenizerJson(json);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->add_space_prefix);
  EXPECT_TRUE(spec->space_prefix_first_only);
}

struct BadJson {
  std::string name;
  std::string from;  // replaced in kByteLevelJson ...
  std::string to;    // ... by this
  absl::StatusCode code;
  std::string message;
};

void PrintTo(const BadJson& c, std::ostream* os) { *os << c.name; }

class BadHfTokenizerJsonTest : public ::testing::TestWithParam<BadJson> {};

TEST_P(BadHfTokenizerJsonTest, IsRejected) {
  std::string json = kByteLevelJson;
  const size_t at = json.find(GetParam().from);
  ASSERT_NE(at, std::string::npos) << GetParam().from;
  json.replace(at, GetParam().from.size(), GetParam().to);
  auto tok = Tokenizer::FromHfTokenizerJson(json);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), GetParam().code) << tok.status();
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadHfTokenizerJsonTest,
    ::testing::Values(BadJson{"NotJson", R"("version": "1.0",)", "{{",
                              absl::StatusCode::kInvalidArgument, "not valid JSON"},
                      BadJson{"WordPiece", R"("type": "BPE")", R"("type": "WordPiece")",
                              absl::StatusCode::kUnimplemented, "WordPiece"},
                      BadJson{"Normalizer", R"("normalizer": null)",
                              R"("normalizer": {"type": "Lowercase"})",
                              absl::StatusCode::kUnimplemented, "Lowercase"},
                      BadJson{"NegativeId", R"("a": 0)", R"("a": -4)",
                              absl::StatusCode::kInvalidArgument, "out of range"},
                      BadJson{"HugeId", R"("a": 0)", R"("a": 4000000000)",
                              absl::StatusCode::kInvalidArgument, "out of range"},
                      // Found by hf_tokenizer_json_fuzz: one id near the limit made the reader
                      // allocate 16.7 million empty slots (1.9 GB under ASan).
                      BadJson{"SparseIds", R"("a": 0)", R"("a": 16777215)",
                              absl::StatusCode::kInvalidArgument, "only"},
                      BadJson{"NonIntegerId", R"("a": 0)", R"("a": "zero")",
                              absl::StatusCode::kInvalidArgument, "not an integer"},
                      BadJson{"TwoTokensOneId", R"("b": 1)", R"("b": 0)",
                              absl::StatusCode::kInvalidArgument, "two different tokens"},
                      BadJson{"SingleWord", R"("normalized": false, "single_word": false},
    {"id": 7)",
                              R"("normalized": false, "single_word": true},
    {"id": 7)",
                              absl::StatusCode::kUnimplemented, "single_word"},
                      BadJson{"BadMerge", R"("a b")", R"("a b c")",
                              absl::StatusCode::kInvalidArgument, "not two tokens"},
                      BadJson{"MergeOfUnknown", R"("a b")", R"("a q")",
                              absl::StatusCode::kInvalidArgument, "not in the vocabulary"},
                      BadJson{"PrefixSpace", R"("add_prefix_space": false)",
                              R"("add_prefix_space": true)", absl::StatusCode::kUnimplemented,
                              "add_prefix_space"},
                      BadJson{"MergesNotArray", R"("merges": [)", R"("merges": 5, "x": [)",
                              absl::StatusCode::kInvalidArgument, "merges"},
                      BadJson{"Dropout", R"("dropout": null)", R"("dropout": 0.1)",
                              absl::StatusCode::kUnimplemented, "dropout"}),
    [](const ::testing::TestParamInfo<BadJson>& info) { return info.param.name; });

}  // namespace
}  // namespace pagellm
