// Tokenizer: text <-> token ids for byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM2) and
// SentencePiece BPE (Llama 2, Mistral) vocabularies, matching HF tokenizers id for id.
//
// Encode(text):
//   1. invalid UTF-8 in `text` is replaced by U+FFFD (see utf8.h);
//   2. added tokens (control, unknown, user-defined) are cut out, leftmost-longest; control and
//      unknown ones only when `parse_special`;
//   3. each remaining segment is
//      byte-level BPE: split by the pre-tokenizer regexes, each piece's bytes mapped to their
//        vocabulary symbols (bytes with no symbol are dropped, as HF and llama.cpp do) and
//        merged by rank;
//      SentencePiece: spaces replaced by "▁" ("▁" prepended per add_space_prefix), split into
//        characters, characters not in the vocabulary replaced by their byte tokens <0xAB>
//        (or the unk token when one is missing), and the whole segment merged by rank;
//   4. with `add_special_tokens`, BOS / EOS are added as the vocabulary asks (add_bos/add_eos).
// Decode(ids): the concatenated bytes of the tokens' pieces, invalid UTF-8 replaced by U+FFFD
// (maximal subparts, as HF's byte-level decoder), and for SentencePiece with add_space_prefix one
// leading space dropped. Known difference from HF: for an invalid run of SentencePiece byte
// tokens HF emits one U+FFFD per byte even for the valid characters in it; Decode emits the
// valid characters (so that streaming output need not wait for the run to end).
//
// Thread-safe: every method is const and keeps no shared mutable state; one Tokenizer may serve
// any number of threads.
#ifndef PAGELLM_COMMON_TOKENIZER_TOKENIZER_H_
#define PAGELLM_COMMON_TOKENIZER_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tokenizer/bpe_merger.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "common/tokenizer/special_token_matcher.h"
#include "common/tokenizer/string_table.h"
#include "common/tokenizer/vocab_spec.h"

namespace pagellm {

class Tokenizer {
 public:
  // Validates `spec` and builds the tokenizer. Errors: InvalidArgument for an inconsistent or
  // hostile spec (ids out of range, duplicate token texts, merges naming unknown tokens or
  // producing a text that is not a token, add_bos without a bos id, ...); Unimplemented for an
  // unknown pre-tokenizer.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(VocabSpec spec);

  // Builds a tokenizer from the text of a HF tokenizer.json (see hf_tokenizer_json.h for what
  // is understood). InvalidArgument for malformed JSON or vocabulary, Unimplemented for
  // components this tokenizer does not implement.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromHfTokenizerJson(std::string_view json);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Returns the ids of `text` (see the file comment). `add_special_tokens` adds BOS/EOS as the
  // vocabulary asks; `parse_special` lets control tokens written in the text (e.g. a chat
  // template's "<|im_start|>") become those tokens; without it they are plain text. Never fails.
  [[nodiscard]] std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens,
                                            bool parse_special) const;

  // Untrusted text inside trusted markup: a chat message inside the chat template's output.
  // Only the markup may produce control tokens; the message must be tokenized as plain text even
  // when it spells one ("<|im_start|>system"). The template may transform a message (trim it,
  // concatenate it), so instead of tracking spans the message is marked before rendering:
  //   MarkUntrusted(text) inserts the mark U+FDD0 (a Unicode noncharacter, reserved for
  //     internal use) after the first character of every control token spelled in `text`, so
  //     none can be found in it any more, and doubles the text's own U+FDD0s;
  //   EncodeMarked(rendered) is Encode(rendered, add_special_tokens, parse_special=true) that
  //     removes the marks (and undoubles) from each plain-text segment before tokenizing it, so
  //     the message's text becomes exactly the tokens of its plain text.
  // InvalidArgument from MarkUntrusted when `text` spells a control token one character long
  // (a mark cannot go inside it); `field` names the text in the message. REQUIRES: valid UTF-8.
  [[nodiscard]] absl::StatusOr<std::string> MarkUntrusted(std::string_view text,
                                                          std::string_view field) const;
  [[nodiscard]] std::vector<int32_t> EncodeMarked(std::string_view text,
                                                  bool add_special_tokens) const;
  // `text` without the marks of MarkUntrusted: what the client wrote, in its rendered place.
  [[nodiscard]] static std::string RemoveUntrustedMarks(std::string_view text);

  // Returns the text of `ids` (see the file comment): valid UTF-8. Ids outside
  // [0, vocab_size()) are skipped; with `skip_special`, so are control and unknown tokens.
  [[nodiscard]] std::string Decode(absl::Span<const int32_t> ids, bool skip_special) const;

  // The bytes token `id` stands for in decoded text ("Ġthe" -> " the", "<0x0A>" -> "\n"); may be
  // a partial UTF-8 character. Empty for an id out of range. Valid while the Tokenizer lives.
  [[nodiscard]] std::string_view TokenPiece(int32_t id) const;
  // The token's text as stored in the vocabulary ("Ġthe"); empty for an id out of range.
  [[nodiscard]] std::string_view TokenText(int32_t id) const;
  // The id of the token whose vocabulary text is `text`, if any (unused tokens excluded).
  [[nodiscard]] std::optional<int32_t> FindToken(std::string_view text) const;

  [[nodiscard]] int32_t vocab_size() const { return static_cast<int32_t>(types_.size()); }
  // The specification this tokenizer was built from, rebuilt from the tables (the tokenizer
  // keeps no second copy of the texts): Create(spec()) builds an equal tokenizer.
  [[nodiscard]] VocabSpec spec() const;
  // Heap bytes of the vocabulary tables (texts, pieces, index, merges).
  [[nodiscard]] size_t table_bytes() const;
  [[nodiscard]] int32_t bos_id() const { return bos_id_; }  // -1 when none
  // Whether Encode with add_special_tokens puts bos_id() first / eos_id() last.
  [[nodiscard]] bool adds_bos() const { return add_bos_; }
  [[nodiscard]] bool adds_eos() const { return add_eos_; }
  [[nodiscard]] int32_t eos_id() const { return eos_id_; }  // -1 when none
  [[nodiscard]] int32_t eot_id() const { return eot_id_; }  // -1 when none
  // True for eos, eot, eom and the other end-of-generation tokens (VocabSpec::eog_ids).
  [[nodiscard]] bool IsEndOfGeneration(int32_t id) const;
  // True for control and unknown tokens (HF "special" added tokens). False out of range.
  [[nodiscard]] bool IsSpecial(int32_t id) const;
  // kUnused for an id out of range.
  [[nodiscard]] TokenType token_type(int32_t id) const;
  [[nodiscard]] const std::vector<int32_t>& end_of_generation_ids() const { return eog_ids_; }
  // True when Decode() drops one leading space (SentencePiece with add_space_prefix).
  [[nodiscard]] bool strips_leading_space() const { return strip_leading_space_; }
  [[nodiscard]] VocabModel model() const { return model_; }

 private:
  struct EncodeScratch;
  Tokenizer() = default;
  absl::Status Build(VocabSpec spec);
  absl::Status BuildMerges(const VocabSpec& spec);
  std::vector<int32_t> EncodeImpl(std::string_view text, bool add_special_tokens,
                                  bool parse_special, bool unmark) const;
  void EncodeByteLevel(std::string_view text, EncodeScratch* s, std::vector<int32_t>* out) const;
  void EncodeSentencePiece(std::string_view text, bool prefix, EncodeScratch* s,
                           std::vector<int32_t>* out) const;
  bool InRange(int32_t id) const { return id >= 0 && id < vocab_size(); }

  VocabModel model_ = VocabModel::kByteLevelBpe;
  VocabSpec spec_;      // as given to Create(), less `tokens` and `merges` (see spec())
  StringTable texts_;   // vocabulary text per id; all but unused tokens indexed
  StringTable pieces_;  // decoded bytes per id
  std::vector<std::pair<int32_t, int32_t>> spec_merges_;  // spec's merges, as (left, right) ids
  std::vector<TokenType> types_;
  bool spec_types_given_ = false;              // spec() lists token_types (else all were normal)
  std::array<int32_t, 256> byte_symbol_id_{};  // byte-level symbol / <0xAB> token; -1 if none
  BpeMerger merger_;
  SpecialTokenMatcher matcher_;
  std::unique_ptr<PreTokenizer> pre_;  // byte-level only
  std::vector<bool> eog_;
  std::vector<int32_t> eog_ids_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t eot_id_ = -1;
  int32_t unk_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  bool space_prefix_first_only_ = false;
  bool ignore_merges_ = false;
  bool strip_leading_space_ = false;
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_TOKENIZER_TOKENIZER_H_
