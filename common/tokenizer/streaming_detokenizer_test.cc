#include "common/tokenizer/streaming_detokenizer.h"

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/tokenizer/byte_level.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;

// Ids 0..255 are single bytes; 256 is a token that ends mid-character ("é" + the first byte of
// "你"; " é" in the SentencePiece variant); 257 = <|end|> (control). The SentencePiece variant
// (add_space_prefix) drops the first leading space of the output.
std::unique_ptr<Tokenizer> MakeTokenizer(bool sentencepiece = false) {
  VocabSpec spec;
  spec.pre = "gpt2";
  for (int b = 0; b < 256; ++b) {
    if (sentencepiece) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      spec.tokens.push_back(buf);
    } else {
      spec.tokens.emplace_back(ByteLevelChar(static_cast<uint8_t>(b)));
    }
  }
  std::string mixed;
  for (char c : std::string("\xC3\xA9\xE4")) mixed += ByteLevelChar(static_cast<uint8_t>(c));
  spec.tokens.push_back(sentencepiece ? "\xE2\x96\x81\xC3\xA9" : mixed);
  spec.tokens.push_back("<|end|>");
  spec.token_types.assign(spec.tokens.size(),
                          sentencepiece ? TokenType::kByte : TokenType::kNormal);
  spec.token_types[256] = TokenType::kNormal;
  spec.token_types[257] = TokenType::kControl;
  if (sentencepiece) {
    spec.model = VocabModel::kSentencePieceBpe;
    spec.add_space_prefix = true;
  }
  auto tok = Tokenizer::Create(std::move(spec));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

TEST(StreamingDetokenizerTest, HoldsBackPartialCharacters) {
  auto tok = MakeTokenizer();
  StreamingDetokenizer d(tok.get());
  EXPECT_EQ(d.Feed('a'), "a");
  EXPECT_EQ(d.Feed(256), "\xC3\xA9");  // "é" out, the first byte of "你" held
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.Feed(0xBD), "");
  EXPECT_EQ(d.Feed(0xA0), "\xE4\xBD\xA0");
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST(StreamingDetokenizerTest, InvalidBytesBecomeReplacementCharactersAsSoonAsCertain) {
  auto tok = MakeTokenizer();
  StreamingDetokenizer d(tok.get());
  EXPECT_EQ(d.Feed(0xE4), "");
  EXPECT_EQ(d.Feed('x'), "\uFFFDx");
  EXPECT_EQ(d.Feed(0xFF), "\uFFFD");
  EXPECT_EQ(d.Feed(0xF0), "");
  EXPECT_EQ(d.Flush(), "\uFFFD");  // truncated at the end
  EXPECT_EQ(d.Flush(), "");
}

TEST(StreamingDetokenizerTest, SkipsSpecialTokensWhenAsked) {
  auto tok = MakeTokenizer();
  StreamingDetokenizer skip(tok.get(), /*skip_special=*/true);
  EXPECT_EQ(skip.Feed(257), "");
  StreamingDetokenizer keep(tok.get(), /*skip_special=*/false);
  EXPECT_EQ(keep.Feed(257), "<|end|>");
  EXPECT_EQ(keep.Feed(-5), "");  // out of range: ignored, as Decode does
}

TEST(StreamingDetokenizerTest, DropsTheLeadingSpaceLikeDecode) {
  auto tok = MakeTokenizer(/*sentencepiece=*/true);
  StreamingDetokenizer d(tok.get());
  EXPECT_EQ(d.Feed(' '), "");
  EXPECT_EQ(d.Feed(' '), " ");
  EXPECT_EQ(d.Feed('a'), "a");
  EXPECT_EQ(tok->Decode({' ', ' ', 'a'}, true), " a");
}

TEST(StreamingDetokenizerTest, ConcatenationEqualsDecodeOnRandomIds) {
  std::mt19937 rng(42);
  for (bool strip : {false, true}) {
    auto tok = MakeTokenizer(strip);
    for (int round = 0; round < 2000; ++round) {
      Ids ids(rng() % 12);
      // Favour bytes that start or continue multi-byte characters.
      for (int32_t& id : ids) id = rng() % 3 == 0 ? 0x80 + rng() % 0x80 : rng() % 259 - 1;
      for (bool skip : {false, true}) {
        StreamingDetokenizer d(tok.get(), skip);
        std::string streamed;
        for (int32_t id : ids) streamed += d.Feed(id);
        streamed += d.Flush();
        ASSERT_EQ(streamed, tok->Decode(ids, skip)) << "round " << round;
      }
    }
  }
}

}  // namespace
}  // namespace pagellm
