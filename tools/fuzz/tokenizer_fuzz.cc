// libFuzzer target for Tokenizer::Encode / Decode and StreamingDetokenizer on four small fixed
// tokenizers (byte-level BPE with GPT-2's and Llama 3's pre-tokenizers, SentencePiece BPE with
// and without byte fallback), built once.
//
// Input: byte 0 picks the tokenizer (bits 0-1), add_special_tokens (bit 2), parse_special
// (bit 3) and skip_special (bit 4). The rest is both the text to encode and the ids to decode:
// read as little-endian int32s (mostly out of range) and as uint16s mapped to [-1, vocab_size()].
//
// Invariants (abort() when one fails): Encode gives ids in [0, vocab_size()), BOS/EOS first/last
// when the vocabulary adds them; Decode gives valid UTF-8; Feed()s + Flush() of a
// StreamingDetokenizer equal Decode of the same ids; and for the GPT-2 byte-level tokenizer,
// whose vocabulary spells every byte and strips nothing, Decode(Encode(text)) without BOS/EOS is
// the text with invalid UTF-8 replaced.
//
// Build and run: see tools/fuzz/run_ci.sh (seeds in tools/fuzz/seeds/tokenizer_fuzz/, dictionary
// tools/fuzz/tokenizer.dict).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/streaming_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "common/utf8.h"
#include "spdlog/spdlog.h"
#include "tools/fuzz/fuzz_check.h"

namespace pagellm {
namespace {

std::string B(uint8_t b) { return std::string(ByteLevelChar(b)); }

// 256 byte symbols, a few merged words, then added tokens.
VocabSpec ByteLevelSpec(bool llama3) {
  VocabSpec spec;
  spec.model = VocabModel::kByteLevelBpe;
  spec.pre = llama3 ? "llama3" : "gpt2";
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(B(static_cast<uint8_t>(b)));
  const std::string sp = B(' ');
  spec.merges = {{"h", "e"},       {"l", "l"},         {"he", "ll"},       {"hell", "o"},
                 {sp, "w"},        {sp + "w", "o"},    {sp, "t"},          {sp + "t", "h"},
                 {sp + "th", "e"}, {"i", "n"},         {sp, "in"},         {"1", "2"},
                 {"12", "3"},      {B(0xC3), B(0xA9)}, {B(0xF0), B(0x9F)}, {sp, sp}};
  for (const auto& [l, r] : spec.merges) spec.tokens.push_back(l + r);
  if (llama3) spec.tokens.push_back("world");  // only reachable through ignore_merges
  spec.token_types.assign(spec.tokens.size(), TokenType::kNormal);
  auto add = [&spec](const char* text, TokenType type) {
    spec.tokens.push_back(text);
    spec.token_types.push_back(type);
    return static_cast<int32_t>(spec.tokens.size() - 1);
  };
  spec.bos_id = add("<|im_start|>", TokenType::kControl);
  spec.eos_id = add("<|im_end|>", TokenType::kControl);
  const int32_t tool = add("<tool>", TokenType::kUserDefined);
  add("<|im", TokenType::kUserDefined);
  add("<|endoftext|>", TokenType::kControl);
  spec.add_bos = true;
  if (llama3) {
    spec.ignore_merges = true;
    spec.add_eos = true;
    spec.lstrip_ids = {tool};
    spec.rstrip_ids = {tool, spec.eos_id};
  }
  return spec;
}

// <unk>, <s>, </s>, the 256 byte tokens (when `byte_tokens`), then pieces by descending score.
VocabSpec SentencePieceSpec(bool byte_tokens) {
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
  const char* pieces[] = {"▁", "a",  "b",  "▁a",   "▁b", "ab",     "▁ab",       "h",
                          "e", "l",  "o",  "he",   "ll", "hell",   "hello",     "▁hello",
                          "é", "你", "好", "你好", "▁▁", "<tool>", "<|im_end|>"};
  for (const char* p : pieces) {
    spec.tokens.push_back(p);
    spec.token_types.push_back(TokenType::kNormal);
    spec.scores.push_back(-static_cast<float>(spec.scores.size()));
  }
  spec.token_types[spec.tokens.size() - 2] = TokenType::kUserDefined;
  spec.token_types[spec.tokens.size() - 1] = TokenType::kControl;
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.eot_id = static_cast<int32_t>(spec.tokens.size() - 1);
  spec.add_bos = true;
  spec.add_space_prefix = true;
  if (!byte_tokens) {
    spec.add_eos = true;
    spec.space_prefix_first_only = true;
  }
  return spec;
}

struct Tokenizers {
  std::unique_ptr<Tokenizer> tok[4];
};

const Tokenizers& Get() {
  static const Tokenizers* t = [] {
    auto* t = new Tokenizers;
    VocabSpec specs[4] = {ByteLevelSpec(false), ByteLevelSpec(true), SentencePieceSpec(true),
                          SentencePieceSpec(false)};
    for (int i = 0; i < 4; ++i) {
      auto tok = Tokenizer::Create(std::move(specs[i]));
      if (!tok.ok()) {
        std::fprintf(stderr, "tokenizer %d: %s\n", i, tok.status().ToString().c_str());
        abort();
      }
      t->tok[i] = *std::move(tok);
    }
    return t;
  }();
  return *t;
}

// Decode and streaming agree and give valid UTF-8.
void CheckDecode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  const std::string text = tok.Decode(ids, skip_special);
  FUZZ_CHECK(IsValidUtf8(text));
  StreamingDetokenizer stream(&tok, skip_special);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string part = stream.Feed(id);
    FUZZ_CHECK(IsValidUtf8(part));
    FUZZ_CHECK(stream.pending_bytes() < 4);
    streamed += part;
  }
  streamed += stream.Flush();
  FUZZ_CHECK(stream.pending_bytes() == 0);
  FUZZ_CHECK(streamed == text);
}

}  // namespace
}  // namespace pagellm

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  spdlog::set_level(spdlog::level::off);
  pagellm::Get();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const pagellm::Tokenizer& tok = *pagellm::Get().tok[flags & 3];
  const bool add_special = flags & 4;
  const bool parse_special = flags & 8;
  const bool skip_special = flags & 16;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const int32_t n = tok.vocab_size();

  // Encode.
  const std::vector<int32_t> ids = tok.Encode(text, add_special, parse_special);
  for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < n);
  if (add_special && tok.adds_bos()) FUZZ_CHECK(!ids.empty() && ids.front() == tok.bos_id());
  if (add_special && tok.adds_eos()) FUZZ_CHECK(!ids.empty() && ids.back() == tok.eos_id());
  if (!add_special) FUZZ_CHECK(ids.empty() == text.empty());
  pagellm::CheckDecode(tok, ids, skip_special);
  if ((flags & 3) == 0 && !add_special) {
    FUZZ_CHECK(tok.Decode(ids, /*skip_special=*/false) == pagellm::SanitizeUtf8(text));
  }

  // Decode arbitrary ids.
  std::vector<int32_t> raw(text.size() / 4);
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * 4);
  pagellm::CheckDecode(tok, raw, skip_special);
  std::vector<int32_t> near;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    const uint16_t v = static_cast<uint8_t>(text[i]) | static_cast<uint8_t>(text[i + 1]) << 8;
    near.push_back(static_cast<int32_t>(v % (n + 2)) - 1);
  }
  pagellm::CheckDecode(tok, near, skip_special);
  return 0;
}
