#include "worker/model/gguf_vocab.h"

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/model/gguf_test_bytes.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;
using Ids = std::vector<int32_t>;

// ---- A minimal GGUF v3 writer (metadata only, no tensors). ----

using gguf_test::Le;
using gguf_test::Str;
using gguf_test::Type;

struct Gguf {
  std::vector<std::string> kvs;

  Gguf& Raw(std::string_view key, GgufValueType t, const std::string& value) {
    kvs.push_back(Str(key) + Type(t) + value);
    return *this;
  }
  Gguf& String(std::string_view key, std::string_view v) {
    return Raw(key, GgufValueType::kString, Str(v));
  }
  Gguf& U32(std::string_view key, uint32_t v) { return Raw(key, GgufValueType::kUint32, Le(v)); }
  Gguf& Bool(std::string_view key, bool v) {
    return Raw(key, GgufValueType::kBool, std::string(1, v ? '\1' : '\0'));
  }
  Gguf& Strings(std::string_view key, const std::vector<std::string>& v) {
    std::string elems;
    for (const std::string& s : v) elems += Str(s);
    return Raw(key, GgufValueType::kArray,
               Type(GgufValueType::kString) + Le<uint64_t>(v.size()) + elems);
  }
  Gguf& I32s(std::string_view key, const std::vector<int32_t>& v) {
    std::string elems;
    for (int32_t x : v) elems += Le(x);
    return Raw(key, GgufValueType::kArray,
               Type(GgufValueType::kInt32) + Le<uint64_t>(v.size()) + elems);
  }
  Gguf& F32s(std::string_view key, const std::vector<float>& v) {
    std::string elems;
    for (float x : v) elems += Le(x);
    return Raw(key, GgufValueType::kArray,
               Type(GgufValueType::kFloat32) + Le<uint64_t>(v.size()) + elems);
  }

  absl::StatusOr<VocabSpec> Read() const {
    std::string s =
        Le<uint32_t>(0x46554747) + Le<uint32_t>(3) + Le<uint64_t>(0) + Le<uint64_t>(kvs.size());
    for (const std::string& kv : kvs) s += kv;
    s.resize((s.size() + 31) / 32 * 32, '\0');
    auto file = GgufFile::FromBytes(s);
    if (!file.ok()) return file.status();
    return VocabFromGguf(**file);
  }
};

// A byte-level vocabulary: "a", "b", "ab", "Ġ", "<|end|>" (control).
Gguf Gpt2() {
  Gguf g;
  g.String("tokenizer.ggml.model", "gpt2")
      .String("tokenizer.ggml.pre", "smollm")
      .Strings("tokenizer.ggml.tokens", {"a", "b", "ab", "Ġ", "<|end|>"})
      .I32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 3})
      .Strings("tokenizer.ggml.merges", {"a b"})
      .U32("tokenizer.ggml.eos_token_id", 4);
  return g;
}

TEST(GgufVocabTest, ReadsAByteLevelVocabulary) {
  auto spec = Gpt2().Read();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model, VocabModel::kByteLevelBpe);
  EXPECT_EQ(spec->pre, "smollm");
  EXPECT_EQ(spec->tokens.size(), 5u);
  EXPECT_EQ(spec->token_types[4], TokenType::kControl);
  ASSERT_EQ(spec->merges.size(), 1u);
  EXPECT_EQ(spec->merges[0], std::make_pair(std::string("a"), std::string("b")));
  EXPECT_EQ(spec->eos_id, 4);
  EXPECT_EQ(spec->bos_id, -1);
  EXPECT_FALSE(spec->add_bos);
  EXPECT_FALSE(spec->ignore_merges);
  auto tok = Tokenizer::Create(*std::move(spec));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->Encode("ab a<|end|>", true, true), (Ids{2, 3, 0, 4}));
  EXPECT_TRUE((*tok)->IsEndOfGeneration(4));
}

TEST(GgufVocabTest, Llama3PreTokenizerAddsBosAndIgnoresMergesByDefault) {
  Gguf g = Gpt2();
  g.kvs[1] = Str("tokenizer.ggml.pre") + Type(GgufValueType::kString) + Str("llama-bpe");
  auto spec = g.Read();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->add_bos);
  EXPECT_TRUE(spec->ignore_merges);
  auto explicit_no = g.Bool("tokenizer.ggml.add_bos_token", false).Read();
  ASSERT_TRUE(explicit_no.ok());
  EXPECT_FALSE(explicit_no->add_bos);
}

TEST(GgufVocabTest, SentencePieceDefaultsToBosAndSpacePrefix) {
  Gguf g;
  g.String("tokenizer.ggml.model", "llama")
      .Strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "▁a"})
      .F32s("tokenizer.ggml.scores", {0, 0, 0, -1})
      .I32s("tokenizer.ggml.token_type", {2, 3, 3, 1})
      .U32("tokenizer.ggml.bos_token_id", 1)
      .U32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);  // "none"
  auto spec = g.Read();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model, VocabModel::kSentencePieceBpe);
  EXPECT_TRUE(spec->add_bos);
  EXPECT_TRUE(spec->add_space_prefix);
  EXPECT_EQ(spec->pad_id, -1);
  EXPECT_EQ(spec->scores[3], -1.0f);
  auto no_prefix = g.Bool("tokenizer.ggml.add_space_prefix", false).Read();
  ASSERT_TRUE(no_prefix.ok());
  EXPECT_FALSE(no_prefix->add_space_prefix);
}

struct BadCase {
  std::string name;
  std::function<Gguf()> make;
  absl::StatusCode code;
  std::string message;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class BadGgufVocabTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadGgufVocabTest, IsRejected) {
  auto spec = GetParam().make().Read();
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), GetParam().code) << spec.status();
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadGgufVocabTest,
    ::testing::Values(
        BadCase{"NoModel", [] { return Gguf(); }, absl::StatusCode::kNotFound, "model"},
        BadCase{"Bert", [] { return Gguf().String("tokenizer.ggml.model", "bert"); },
                absl::StatusCode::kUnimplemented, "bert"},
        BadCase{"ModelNotString", [] { return Gguf().U32("tokenizer.ggml.model", 1); },
                absl::StatusCode::kInvalidArgument, "not a string"},
        BadCase{"UnknownPre",
                [] {
                  Gguf g = Gpt2();
                  g.kvs[1] =
                      Str("tokenizer.ggml.pre") + Type(GgufValueType::kString) + Str("klingon");
                  return g;
                },
                absl::StatusCode::kUnimplemented, "klingon"},
        BadCase{"NoTokens", [] { return Gguf().String("tokenizer.ggml.model", "gpt2"); },
                absl::StatusCode::kNotFound, "tokens"},
        BadCase{"TokensNotStrings",
                [] {
                  return Gguf()
                      .String("tokenizer.ggml.model", "gpt2")
                      .I32s("tokenizer.ggml.tokens", {1, 2});
                },
                absl::StatusCode::kInvalidArgument, "not a string"},
        BadCase{"ScoresLength", [] { return Gpt2().F32s("tokenizer.ggml.scores", {1.0f}); },
                absl::StatusCode::kInvalidArgument, "length"},
        BadCase{"TypesLength",
                [] {
                  Gguf g = Gpt2();
                  g.kvs[3] = Str("tokenizer.ggml.token_type") + Type(GgufValueType::kArray) +
                             Type(GgufValueType::kInt32) + Le<uint64_t>(1) + Le<int32_t>(1);
                  return g;
                },
                absl::StatusCode::kInvalidArgument, "length"},
        BadCase{"TypeOutOfRange",
                [] {
                  Gguf g = Gpt2();
                  g.kvs[3] = Str("tokenizer.ggml.token_type") + Type(GgufValueType::kArray) +
                             Type(GgufValueType::kInt32) + Le<uint64_t>(5) + Le<int32_t>(1) +
                             Le<int32_t>(1) + Le<int32_t>(1) + Le<int32_t>(9) + Le<int32_t>(3);
                  return g;
                },
                absl::StatusCode::kInvalidArgument, "1..6"},
        BadCase{"MergeWithoutSpace",
                [] {
                  Gguf g = Gpt2();
                  g.kvs[4] = Str("tokenizer.ggml.merges") + Type(GgufValueType::kArray) +
                             Type(GgufValueType::kString) + Le<uint64_t>(1) + Str("ab");
                  return g;
                },
                absl::StatusCode::kInvalidArgument, "no space"},
        BadCase{"Gpt2WithoutMerges",
                [] {
                  Gguf g = Gpt2();
                  g.kvs.erase(g.kvs.begin() + 4);
                  return g;
                },
                absl::StatusCode::kInvalidArgument, "merges"},
        BadCase{"IdNotInteger", [] { return Gpt2().String("tokenizer.ggml.bos_token_id", "one"); },
                absl::StatusCode::kInvalidArgument, "not an integer"},
        BadCase{"AddBosNotBool", [] { return Gpt2().U32("tokenizer.ggml.add_bos_token", 1); },
                absl::StatusCode::kInvalidArgument, "not a bool"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(GgufVocabTest, OutOfRangeIdsAreRejectedByTheTokenizer) {
  auto spec = Gpt2().U32("tokenizer.ggml.bos_token_id", 77).Read();
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto tok = Tokenizer::Create(*std::move(spec));
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GgufVocabTest, ReadsTheDefaultModel) {
  const std::string path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing (tools/fetch_model.sh)";
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto spec = VocabFromGguf(**file);
  ASSERT_TRUE(spec.ok()) << spec.status();
  // Values as stored in the file's metadata (gguf-dump shows the same).
  EXPECT_EQ(spec->tokens.size(), 49152u);
  EXPECT_EQ(spec->merges.size(), 48900u);
  EXPECT_EQ(spec->pre, "smollm");
  EXPECT_EQ(spec->bos_id, 1);
  EXPECT_EQ(spec->eos_id, 2);
  EXPECT_FALSE(spec->add_bos);
  auto tok = Tokenizer::Create(*std::move(spec));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->FindToken("<|im_end|>"), 2);
  EXPECT_EQ((*tok)->eot_id(), 2);
  EXPECT_TRUE((*tok)->IsEndOfGeneration(0));  // <|endoftext|>
  EXPECT_FALSE((*tok)->IsEndOfGeneration(1));
}

}  // namespace
}  // namespace pagellm
