#include "common/tokenizer/pre_tokenizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::ElementsAreArray;

std::vector<std::string> Split(std::string_view name, std::string_view text) {
  auto pre = PreTokenizer::Create(name);
  EXPECT_TRUE(pre.ok()) << pre.status();
  std::vector<std::string_view> pieces;
  (*pre)->Split(text, &pieces);
  return {pieces.begin(), pieces.end()};
}

struct Case {
  std::string pre;
  std::string text;
  std::vector<std::string> pieces;
};

class PreTokenizerTest : public ::testing::TestWithParam<Case> {};

TEST_P(PreTokenizerTest, SplitsLikeHfTokenizers) {
  EXPECT_THAT(Split(GetParam().pre, GetParam().text), ElementsAreArray(GetParam().pieces));
}

// Expected pieces are what HF tokenizers 0.21.1's pre_tokenize_str gives for the same
// pre-tokenizer (ByteLevel output mapped back to raw bytes).
INSTANTIATE_TEST_SUITE_P(
    Families, PreTokenizerTest,
    ::testing::Values(Case{"gpt2", "Hello world", {"Hello", " world"}},
                      Case{"gpt2", "I'm  fine\n\n ok", {"I", "'m", " ", " fine", "\n\n", " ok"}},
                      Case{"gpt2", "x 12345", {"x", " 12345"}},
                      Case{"smollm", "x 12345", {"x", " ", "1", "2", "3", "4", "5"}},
                      Case{"llama3", "x 12345", {"x", " ", "123", "45"}},
                      Case{"qwen2", "x 12345", {"x", " ", "1", "2", "3", "4", "5"}},
                      Case{"gpt2", "DON'T", {"DON", "'", "T"}},
                      Case{"llama3", "DON'T", {"DON", "'T"}}, Case{"qwen2", "DON'T", {"DON", "'T"}},
                      Case{"gpt2", "a\u0085b  \u00a0c", {"a", "\u0085", "b", "  ", "\u00a0", "c"}},
                      Case{"llama3", "a\u0085b  \u00a0c", {"a", "\u0085b", "  ", "\u00a0c"}},
                      Case{"gpt2", "", {}}));

TEST(PreTokenizerNamesTest, UnknownNamesAreUnimplemented) {
  EXPECT_EQ(PreTokenizer::Create("no-such-model").status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(PreTokenizerDefaultsFor("no-such-model").status().code(),
            absl::StatusCode::kUnimplemented);
  ASSERT_TRUE(PreTokenizerDefaultsFor("llama-bpe").ok());
  EXPECT_TRUE(PreTokenizerDefaultsFor("llama-bpe")->ignore_merges);
  EXPECT_FALSE(PreTokenizerDefaultsFor("smollm")->add_bos);
}

TEST(PreTokenizerPatternsTest, PiecesAlwaysCoverTheText) {
  auto pre = PreTokenizer::FromPatterns({"b+", "x?"});  // the second can match empty
  ASSERT_TRUE(pre.ok()) << pre.status();
  std::vector<std::string_view> pieces;
  (*pre)->Split("abbcxd", &pieces);
  EXPECT_THAT(std::vector<std::string>(pieces.begin(), pieces.end()),
              ElementsAreArray({"a", "bb", "c", "x", "d"}));
  EXPECT_EQ(PreTokenizer::FromPatterns({"("}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PreTokenizerPatternsTest, LongRunsDoNotExhaustTheMatcher) {
  for (std::string_view name : {"gpt2", "llama3", "qwen2", "smollm"}) {
    auto pre = PreTokenizer::Create(name);
    ASSERT_TRUE(pre.ok());
    for (char c : {' ', 'a', '1', '!', '\n'}) {
      const std::string text(1 << 20, c);
      std::vector<std::string_view> pieces;
      (*pre)->Split(text, &pieces);
      size_t total = 0;
      for (std::string_view p : pieces) total += p.size();
      EXPECT_EQ(total, text.size()) << name << " '" << c << "'";
    }
  }
}

}  // namespace
}  // namespace pagellm
