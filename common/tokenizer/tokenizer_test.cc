#include "common/tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "common/tokenizer/byte_level.h"
#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Ids = std::vector<int32_t>;

// ---- Byte-level BPE: ids 0..255 are the byte symbols in byte order, then `extra` tokens. ----

VocabSpec ByteLevelSpec(const std::vector<std::string>& extra,
                        const std::vector<std::pair<std::string, std::string>>& merges) {
  VocabSpec spec;
  spec.model = VocabModel::kByteLevelBpe;
  spec.pre = "gpt2";
  for (int b = 0; b < 256; ++b) spec.tokens.emplace_back(ByteLevelChar(static_cast<uint8_t>(b)));
  for (const std::string& t : extra) spec.tokens.push_back(t);
  spec.merges = merges;
  return spec;
}

std::unique_ptr<Tokenizer> MustCreate(VocabSpec spec) {
  auto tok = Tokenizer::Create(std::move(spec));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

// Texts of `ids`, for readable expectations.
std::vector<std::string> Texts(const Tokenizer& tok, const Ids& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.emplace_back(tok.TokenText(id));
  return out;
}

TEST(ByteLevelTokenizerTest, LowerRankMergesFirst) {
  // "abc": (b c) outranks (a b), so "a" + "bc".
  auto tok = MustCreate(ByteLevelSpec({"bc", "ab"}, {{"b", "c"}, {"a", "b"}}));
  EXPECT_THAT(Texts(*tok, tok->Encode("abc", false, false)), ElementsAre("a", "bc"));
  auto rev = MustCreate(ByteLevelSpec({"bc", "ab"}, {{"a", "b"}, {"b", "c"}}));
  EXPECT_THAT(Texts(*rev, rev->Encode("abc", false, false)), ElementsAre("ab", "c"));
}

TEST(ByteLevelTokenizerTest, EqualRanksMergeLeftmostFirst) {
  auto tok = MustCreate(ByteLevelSpec({"aa"}, {{"a", "a"}}));
  EXPECT_THAT(Texts(*tok, tok->Encode("aaa", false, false)), ElementsAre("aa", "a"));
  EXPECT_THAT(Texts(*tok, tok->Encode("aaaa", false, false)), ElementsAre("aa", "aa"));
}

TEST(ByteLevelTokenizerTest, MergesBuildOnEarlierMerges) {
  auto tok = MustCreate(ByteLevelSpec(
      {"he", "ll", "hell", "hello", "Ġw", "Ġwo"},
      {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"Ġw", "o"}}));
  EXPECT_THAT(Texts(*tok, tok->Encode("hello world", false, false)),
              ElementsAre("hello", "Ġwo", "r", "l", "d"));
}

TEST(ByteLevelTokenizerTest, MergesNeverCrossPreTokenizerPieces) {
  // (o Ġ) would join "o" and " " but GPT-2's regex puts them in different pieces.
  auto tok = MustCreate(ByteLevelSpec({"oĠ"}, {{"o", "Ġ"}}));
  EXPECT_THAT(Texts(*tok, tok->Encode("o x", false, false)), ElementsAre("o", "Ġ", "x"));
}

TEST(ByteLevelTokenizerTest, DecodeMapsSymbolsBackToBytes) {
  auto tok = MustCreate(ByteLevelSpec({"Ġw"}, {{"Ġ", "w"}}));
  const Ids ids = tok->Encode("é w\n", false, false);
  EXPECT_EQ(tok->Decode(ids, false), "é w\n");
  EXPECT_EQ(tok->TokenPiece(256), " w");
  EXPECT_EQ(tok->TokenPiece('\n'), "\n");
  EXPECT_EQ(tok->TokenPiece(-1), "");
  EXPECT_EQ(tok->TokenPiece(100000), "");
}

TEST(ByteLevelTokenizerTest, BytesMissingFromTheVocabularyAreDropped) {
  VocabSpec spec = ByteLevelSpec({}, {});
  spec.tokens[4] = "<unused-4>";  // no symbol for byte 0x04
  auto tok = MustCreate(std::move(spec));
  EXPECT_EQ(tok->Encode("a\x04"
                        "b",
                        false, false),
            (Ids{'a', 'b'}));
}

TEST(ByteLevelTokenizerTest, IgnoreMergesEmitsWholeVocabularyWords) {
  // "abc" is a token but no merge reaches it; with ignore_merges it is used whole.
  VocabSpec spec = ByteLevelSpec({"abc"}, {{"a", "b"}});
  spec.tokens.push_back("ab");
  spec.pre = "llama3";
  auto plain = MustCreate(spec);
  EXPECT_THAT(Texts(*plain, plain->Encode("abc", false, false)), ElementsAre("ab", "c"));
  spec.ignore_merges = true;
  auto ignoring = MustCreate(spec);
  EXPECT_THAT(Texts(*ignoring, ignoring->Encode("abc", false, false)), ElementsAre("abc"));
}

// ---- Added tokens. ----

class SpecialTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    VocabSpec spec = ByteLevelSpec({"<|im_start|>", "<|im_end|>", "<tool>", "<|im"}, {});
    spec.token_types.assign(spec.tokens.size(), TokenType::kNormal);
    spec.token_types[kStart] = TokenType::kControl;
    spec.token_types[kEnd] = TokenType::kControl;
    spec.token_types[kTool] = TokenType::kUserDefined;
    spec.token_types[kShort] = TokenType::kUserDefined;
    spec.bos_id = kStart;
    spec.eos_id = kEnd;
    tok_ = MustCreate(std::move(spec));
  }
  static constexpr int32_t kStart = 256, kEnd = 257, kTool = 258, kShort = 259;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(SpecialTokenTest, ControlTokensAreParsedOnlyWhenAsked) {
  EXPECT_EQ(tok_->Encode("x<|im_end|>y", false, true), (Ids{'x', kEnd, 'y'}));
  const Ids raw = tok_->Encode("x<|im_end|>y", false, false);
  EXPECT_EQ(tok_->Decode(raw, false), "x<|im_end|>y");
  EXPECT_THAT(raw, ::testing::Not(::testing::Contains(kEnd)));
}

TEST_F(SpecialTokenTest, UserDefinedTokensAreAlwaysParsed) {
  EXPECT_EQ(tok_->Encode("a<tool>b", false, false), (Ids{'a', kTool, 'b'}));
  EXPECT_EQ(tok_->Encode("a<tool>b", false, true), (Ids{'a', kTool, 'b'}));
}

TEST_F(SpecialTokenTest, LongestMatchWins) {
  // "<|im" is a user-defined prefix of "<|im_start|>".
  EXPECT_EQ(tok_->Encode("<|im_start|>", false, true), (Ids{kStart}));
  // Not parsing specials: the control token still shadows the shorter user-defined one.
  EXPECT_EQ(tok_->Decode(tok_->Encode("<|im_start|>", false, false), false), "<|im_start|>");
  EXPECT_THAT(tok_->Encode("<|im_start|>", false, false),
              ::testing::Not(::testing::Contains(kShort)));
  EXPECT_EQ(tok_->Encode("<|imx", false, false), (Ids{kShort, 'x'}));
}

TEST_F(SpecialTokenTest, DecodeCanSkipSpecialTokens) {
  const Ids ids{kStart, 'h', 'i', kTool, kEnd};
  EXPECT_EQ(tok_->Decode(ids, false), "<|im_start|>hi<tool><|im_end|>");
  EXPECT_EQ(tok_->Decode(ids, true), "hi<tool>");
  EXPECT_TRUE(tok_->IsSpecial(kStart));
  EXPECT_FALSE(tok_->IsSpecial(kTool));
  EXPECT_FALSE(tok_->IsSpecial('a'));
}

TEST_F(SpecialTokenTest, EndOfGenerationIncludesNamedEndOfTurnTokens) {
  EXPECT_TRUE(tok_->IsEndOfGeneration(kEnd));
  EXPECT_EQ(tok_->eot_id(), kEnd);  // found by name
  EXPECT_FALSE(tok_->IsEndOfGeneration(kStart));
  EXPECT_FALSE(tok_->IsEndOfGeneration(-3));
  EXPECT_EQ(tok_->FindToken("<|im_end|>"), kEnd);
  EXPECT_EQ(tok_->FindToken("nope"), std::nullopt);
}

TEST(AddSpecialTokensTest, AddsBosAndEosAsConfigured) {
  VocabSpec spec = ByteLevelSpec({"<s>", "</s>"}, {});
  spec.token_types.assign(spec.tokens.size(), TokenType::kNormal);
  spec.token_types[256] = spec.token_types[257] = TokenType::kControl;
  spec.bos_id = 256;
  spec.eos_id = 257;
  spec.add_bos = true;
  spec.add_eos = true;
  auto tok = MustCreate(spec);
  EXPECT_EQ(tok->Encode("a", true, false), (Ids{256, 'a', 257}));
  EXPECT_EQ(tok->Encode("", true, false), (Ids{256, 257}));
  EXPECT_EQ(tok->Encode("a", false, false), (Ids{'a'}));
}

TEST(AddedTokenStripTest, LstripAndRstripSwallowWhitespace) {
  VocabSpec spec = ByteLevelSpec({"<mask>"}, {});
  spec.token_types.assign(spec.tokens.size(), TokenType::kNormal);
  spec.token_types[256] = TokenType::kUserDefined;
  spec.lstrip_ids = {256};
  spec.rstrip_ids = {256};
  auto tok = MustCreate(spec);
  EXPECT_EQ(tok->Encode("a  <mask>\t b", false, false), (Ids{'a', 256, 'b'}));
}

// ---- SentencePiece BPE. ----

// <unk>, <s>, </s>, the 256 byte tokens, then `pieces` with descending scores.
VocabSpec SpmSpec(const std::vector<std::string>& pieces, bool byte_tokens = true) {
  VocabSpec spec;
  spec.model = VocabModel::kSentencePieceBpe;
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  if (byte_tokens) {
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      spec.tokens.push_back(buf);
      spec.token_types.push_back(TokenType::kByte);
    }
  }
  spec.scores.assign(spec.tokens.size(), 0.0f);
  for (size_t i = 0; i < pieces.size(); ++i) {
    spec.tokens.push_back(pieces[i]);
    spec.token_types.push_back(TokenType::kNormal);
    spec.scores.push_back(-static_cast<float>(i));
  }
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.add_bos = true;
  spec.add_space_prefix = true;
  return spec;
}

TEST(SentencePieceTokenizerTest, SpacesBecomeMetaspaceWithAPrefix) {
  auto tok = MustCreate(SpmSpec({"▁", "a", "b", "▁a", "▁b", "ab"}));
  EXPECT_THAT(Texts(*tok, tok->Encode("a b", false, false)), ElementsAre("▁a", "▁b"));
  EXPECT_THAT(Texts(*tok, tok->Encode("a b", true, false)), ElementsAre("<s>", "▁a", "▁b"));
  EXPECT_EQ(tok->Decode(tok->Encode("a b", true, false), true), "a b");
  EXPECT_EQ(tok->Decode(tok->Encode(" a", true, false), true), " a");
}

TEST(SentencePieceTokenizerTest, HigherScoreMergesFirst) {
  // "▁ab": "▁a" (score -3) outranks "ab" (-5), so "▁a" + "b" rather than "▁" + "ab".
  auto tok = MustCreate(SpmSpec({"▁", "a", "b", "▁a", "x", "ab"}));
  EXPECT_THAT(Texts(*tok, tok->Encode("ab", false, false)), ElementsAre("▁a", "b"));
  auto rev = MustCreate(SpmSpec({"▁", "a", "b", "ab", "x", "▁a"}));
  EXPECT_THAT(Texts(*rev, rev->Encode("ab", false, false)), ElementsAre("▁", "ab"));
}

TEST(SentencePieceTokenizerTest, UnknownCharactersFallBackToBytes) {
  auto tok = MustCreate(SpmSpec({"▁", "a"}));
  EXPECT_THAT(Texts(*tok, tok->Encode("aé", false, false)),
              ElementsAre("▁", "a", "<0xC3>", "<0xA9>"));
  EXPECT_EQ(tok->Decode(tok->Encode("aé", false, false), false), "aé");
  EXPECT_EQ(tok->TokenPiece(3 + 0xC3), "\xC3");
}

TEST(SentencePieceTokenizerTest, WithoutByteTokensUnknownsBecomeOneUnk) {
  VocabSpec spec = SpmSpec({"▁", "a"}, /*byte_tokens=*/false);
  auto tok = MustCreate(spec);
  EXPECT_THAT(Texts(*tok, tok->Encode("aéé a", false, false)),
              ElementsAre("▁", "a", "<unk>", "▁", "a"));
}

TEST(SentencePieceTokenizerTest, PrefixGoesAfterEverySpecialTokenByDefault) {
  VocabSpec spec = SpmSpec({"▁", "a", "▁a"});
  auto tok = MustCreate(spec);
  EXPECT_THAT(Texts(*tok, tok->Encode("a</s>a", false, true)), ElementsAre("▁a", "</s>", "▁a"));
  spec.space_prefix_first_only = true;
  auto first = MustCreate(spec);
  EXPECT_THAT(Texts(*first, first->Encode("a</s>a", false, true)), ElementsAre("▁a", "</s>", "a"));
  EXPECT_THAT(Texts(*first, first->Encode("</s>a", false, true)), ElementsAre("</s>", "a"));
  spec.add_space_prefix = false;
  auto none = MustCreate(spec);
  EXPECT_THAT(Texts(*none, none->Encode("a a", false, true)), ElementsAre("a", "▁a"));
  EXPECT_EQ(none->Decode(none->Encode(" a", false, false), false), " a");
}

// ---- Invalid UTF-8. ----

TEST(InvalidUtf8Test, EncodeTreatsInvalidBytesAsReplacementCharacters) {
  auto tok = MustCreate(ByteLevelSpec({}, {}));
  EXPECT_EQ(tok->Encode("a\xFF"
                        "b",
                        false, false),
            tok->Encode("a\uFFFD"
                        "b",
                        false, false));
  EXPECT_EQ(tok->Encode("\xE4\xBD", false, false), tok->Encode("\uFFFD", false, false));
  auto spm = MustCreate(SpmSpec({"▁", "a"}));
  EXPECT_EQ(spm->Decode(spm->Encode("a\xC0\x80", false, false), false), "a\uFFFD\uFFFD");
}

TEST(InvalidUtf8Test, DecodeReplacesInvalidByteSequences) {
  auto tok = MustCreate(ByteLevelSpec({}, {}));
  EXPECT_EQ(tok->Decode({0xE4, 0xBD}, false), "\uFFFD");  // truncated character
  EXPECT_EQ(tok->Decode({0xE4, 0xBD, 0xA0}, false), "你");
  EXPECT_EQ(tok->Decode({0xFF, 'a', 0x80}, false),
            "\uFFFD"
            "a"
            "\uFFFD");
  EXPECT_EQ(tok->Decode({0xED, 0xA0, 0x80}, false), "\uFFFD\uFFFD\uFFFD");  // surrogate
}

TEST(InvalidUtf8Test, RandomBytesRoundTripToTheirSanitizedText) {
  auto byte_level = MustCreate(ByteLevelSpec({"ab", "Ġa"}, {{"a", "b"}, {"Ġ", "a"}}));
  auto spm = MustCreate(SpmSpec({"▁", "a", "b", "▁a", "ab", "<", "s", ">"}));
  std::mt19937 rng(1);
  const std::string alphabet = "ab <s>\n\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80\x80\xFF";
  for (int round = 0; round < 3000; ++round) {
    std::string text(rng() % 24, ' ');
    for (char& c : text)
      c = rng() % 4 == 0 ? static_cast<char>(rng()) : alphabet[rng() % alphabet.size()];
    const std::string want = SanitizeUtf8(text);
    for (const Tokenizer* tok : {byte_level.get(), spm.get()}) {
      ASSERT_EQ(tok->Decode(tok->Encode(text, false, false), false), want)
          << absl::CHexEscape(text);
    }
  }
}

// ---- Export and footprint. ----

void ExpectSameSpec(const VocabSpec& got, const VocabSpec& want) {
  EXPECT_EQ(got.model, want.model);
  EXPECT_EQ(got.pre, want.pre);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.scores, want.scores);
  EXPECT_EQ(got.token_types, want.token_types);
  EXPECT_EQ(got.merges, want.merges);
  EXPECT_EQ(got.bos_id, want.bos_id);
  EXPECT_EQ(got.add_bos, want.add_bos);
}

TEST(SpecExportTest, SpecIsTheSpecificationGiven) {
  // Byte-level with merges and no token types; SentencePiece with scores, types, no merges.
  VocabSpec byte_level = ByteLevelSpec({"he", "ll", "hell", "hello", "<|im_end|>"},
                                       {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}});
  byte_level.bos_id = 260;
  byte_level.add_bos = true;
  const VocabSpec spm = SpmSpec({"▁", "a", "b", "▁a", "▁b", "ab"});
  for (const VocabSpec& want : {byte_level, spm}) {
    auto tok = MustCreate(want);
    const VocabSpec got = tok->spec();
    ExpectSameSpec(got, want);
    auto rebuilt = MustCreate(got);
    for (const char* text : {"hello hell he", "a b ab ba", "<|im_end|>x"}) {
      EXPECT_EQ(rebuilt->Encode(text, true, true), tok->Encode(text, true, true)) << text;
    }
  }
}

TEST(SpecExportTest, TablesTakeAboutTheTextsBytes) {
  // 49,152 tokens of 6 bytes (SmolLM2's vocabulary size): texts and pieces end to end, 4-byte
  // offsets and index slots, not a std::string (32 bytes) per text and per hash-map key.
  std::vector<std::string> extra;
  std::mt19937 rng(5);
  while (extra.size() < 49152 - 256) {
    std::string t(6, 'a');
    for (char& c : t) c = static_cast<char>('a' + rng() % 26);
    extra.push_back(t);
  }
  std::sort(extra.begin(), extra.end());
  extra.erase(std::unique(extra.begin(), extra.end()), extra.end());
  auto tok = MustCreate(ByteLevelSpec(extra, {}));
  const double per_token = static_cast<double>(tok->table_bytes()) / tok->vocab_size();
  EXPECT_LT(per_token, 40.0) << tok->table_bytes() << " bytes";
}

// ---- Thread safety. ----

TEST(ConcurrencyTest, ConcurrentEncodesAgree) {
  auto tok = MustCreate(ByteLevelSpec({"he", "ll", "hell", "hello"},
                                      {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}}));
  const std::string text = "hello world, hello again 123 你好 \n\t hello";
  const Ids want = tok->Encode(text, false, false);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) mismatches[t] += tok->Encode(text, false, false) != want;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

// ---- Hostile specs. ----

struct BadSpecCase {
  std::string name;
  std::function<void(VocabSpec*)> mutate;
  absl::StatusCode code;
  std::string message;
};

void PrintTo(const BadSpecCase& c, std::ostream* os) { *os << c.name; }

class HostileSpecTest : public ::testing::TestWithParam<BadSpecCase> {};

TEST_P(HostileSpecTest, IsRejected) {
  VocabSpec spec = ByteLevelSpec({"ab"}, {{"a", "b"}});
  GetParam().mutate(&spec);
  auto tok = Tokenizer::Create(std::move(spec));
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), GetParam().code) << tok.status();
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Specs, HostileSpecTest,
    ::testing::Values(
        BadSpecCase{"Empty",
                    [](VocabSpec* s) {
                      s->tokens.clear();
                      s->merges.clear();
                    },
                    absl::StatusCode::kInvalidArgument, "empty"},
        BadSpecCase{"ScoresLength", [](VocabSpec* s) { s->scores = {1.0f}; },
                    absl::StatusCode::kInvalidArgument, "scores"},
        BadSpecCase{"NanScore",
                    [](VocabSpec* s) { s->scores.assign(s->tokens.size(), std::nanf("")); },
                    absl::StatusCode::kInvalidArgument, "NaN"},
        BadSpecCase{"TypesLength", [](VocabSpec* s) { s->token_types = {TokenType::kNormal}; },
                    absl::StatusCode::kInvalidArgument, "token types"},
        BadSpecCase{"TypeOutOfRange",
                    [](VocabSpec* s) {
                      s->token_types.assign(s->tokens.size(), static_cast<TokenType>(9));
                    },
                    absl::StatusCode::kInvalidArgument, "type 9"},
        BadSpecCase{"BosOutOfRange", [](VocabSpec* s) { s->bos_id = 257; },
                    absl::StatusCode::kInvalidArgument, "bos id 257"},
        BadSpecCase{"EosNegative", [](VocabSpec* s) { s->eos_id = -7; },
                    absl::StatusCode::kInvalidArgument, "eos id -7"},
        BadSpecCase{"EogOutOfRange", [](VocabSpec* s) { s->eog_ids = {1 << 30}; },
                    absl::StatusCode::kInvalidArgument, "outside the vocabulary"},
        BadSpecCase{"StripNegative", [](VocabSpec* s) { s->lstrip_ids = {-1}; },
                    absl::StatusCode::kInvalidArgument, "< 0"},
        BadSpecCase{"AddBosWithoutBos", [](VocabSpec* s) { s->add_bos = true; },
                    absl::StatusCode::kInvalidArgument, "add_bos"},
        BadSpecCase{"DuplicateToken", [](VocabSpec* s) { s->tokens.push_back("ab"); },
                    absl::StatusCode::kInvalidArgument, "same text"},
        BadSpecCase{"MergeOfUnknownToken",
                    [](VocabSpec* s) {
                      s->merges.push_back({"zz", "a"});
                    },
                    absl::StatusCode::kInvalidArgument, "not in the vocabulary"},
        BadSpecCase{"MergeResultNotAToken",
                    [](VocabSpec* s) {
                      s->merges.push_back({"b", "a"});
                    },
                    absl::StatusCode::kInvalidArgument, "yields a text"},
        BadSpecCase{"UnknownPreTokenizer", [](VocabSpec* s) { s->pre = "klingon"; },
                    absl::StatusCode::kUnimplemented, "klingon"},
        BadSpecCase{"BadPattern", [](VocabSpec* s) { s->pre_patterns = {"(unclosed"}; },
                    absl::StatusCode::kInvalidArgument, "regex"}),
    [](const ::testing::TestParamInfo<BadSpecCase>& info) { return info.param.name; });

}  // namespace
}  // namespace pagellm
