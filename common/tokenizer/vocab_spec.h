// VocabSpec: everything a Tokenizer is built from, as plain data. Filled from GGUF metadata
// (worker/model/gguf_vocab.h) or from a Hugging Face tokenizer.json (hf_tokenizer_json.h).
// Tokenizer::Create() validates it; nothing here is trusted.
#ifndef PAGELLM_COMMON_TOKENIZER_VOCAB_SPEC_H_
#define PAGELLM_COMMON_TOKENIZER_VOCAB_SPEC_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pagellm {

// Token types, numbered as GGUF's tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,      // the unk token; special
  kControl = 3,      // <s>, <|im_start|>, ...; special: matched in text only when parsing
                     // special tokens, skipped by Decode(skip_special)
  kUserDefined = 4,  // added token that is always matched in text and always decoded
  kUnused = 5,       // never produced by Encode; decodes to its text
  kByte = 6,         // SentencePiece byte-fallback token "<0xAB>"
};

enum class VocabModel {
  // GPT-2 style: text is split by a regex pre-tokenizer, bytes are mapped to printable
  // characters, merges come from the merge list. GGUF "gpt2".
  kByteLevelBpe,
  // SentencePiece BPE (Llama 2, Mistral): spaces become "▁", unknown characters fall back to
  // byte tokens. Merge priority comes from `merges` if given, else from `scores`. GGUF "llama".
  kSentencePieceBpe,
};

struct VocabSpec {
  VocabModel model = VocabModel::kByteLevelBpe;
  // Pre-tokenizer name as in GGUF tokenizer.ggml.pre (see pre_tokenizer.h for the list);
  // only used by kByteLevelBpe.
  std::string pre = "default";
  // When non-empty, these regexes (applied in order, see pre_tokenizer.h) replace the ones
  // `pre` names; filled from a tokenizer.json's Split / Digits / ByteLevel steps.
  std::vector<std::string> pre_patterns;

  // Indexed by token id. `scores` and `token_types` may be empty (all 0 / all kNormal);
  // otherwise they have tokens.size() entries.
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<TokenType> token_types;
  // (left, right) token texts, highest priority first.
  std::vector<std::pair<std::string, std::string>> merges;

  // -1 when the vocabulary has none.
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  int32_t eot_id = -1;  // end of turn, e.g. <|im_end|> or <|eot_id|>
  int32_t eom_id = -1;  // end of message (Llama 3.1 tool calls)
  // Further ids that end generation. Create() adds eos/eot/eom and well-known end-of-turn
  // control tokens found by name (<|im_end|>, <|eot_id|>, <|endoftext|>, <end_of_turn>, ...).
  std::vector<int32_t> eog_ids;

  bool add_bos = false;
  bool add_eos = false;
  // kSentencePieceBpe: prepend "▁" to the text. By default to every text segment that starts
  // the input or follows a special token (llama.cpp, HF legacy Prepend normalizer); with
  // `space_prefix_first_only` only to a segment at the very start of the input (HF Metaspace
  // prepend_scheme "first"). Decode() drops one leading space when set.
  bool add_space_prefix = false;
  bool space_prefix_first_only = false;
  // kByteLevelBpe: a pre-token that is itself in the vocabulary is emitted whole, without
  // merging (Llama 3; HF "ignore_merges").
  bool ignore_merges = false;

  // Added tokens that swallow whitespace to their left / right when matched (HF lstrip/rstrip).
  std::vector<int32_t> lstrip_ids;
  std::vector<int32_t> rstrip_ids;
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_TOKENIZER_VOCAB_SPEC_H_
