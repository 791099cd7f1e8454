// Reads a Hugging Face tokenizer.json into a VocabSpec.
//
// Understood (anything else is Unimplemented, naming the component):
//   model: BPE without dropout, continuing_subword_prefix or end_of_word_suffix;
//     merges as "a b" strings or ["a", "b"] pairs; ignore_merges.
//   Byte-level BPE (byte_fallback false): normalizer null (or NFC, which is assumed to hold
//     already: input is not re-normalized); pre_tokenizer a ByteLevel (add_prefix_space false)
//     alone or in a Sequence after Split(Regex, Isolated) and Digits(individual_digits) steps.
//     The regexes are used as written (PCRE2 reads Oniguruma's syntax for these patterns).
//   SentencePiece-style BPE (byte_fallback true): normalizer Sequence[Prepend("▁"),
//     Replace(" ", "▁")] or Replace alone with no pre_tokenizer (Llama 2 "legacy"), or no
//     normalizer and a Metaspace pre_tokenizer (replacement "▁", split false).
//   added_tokens: special ones become kControl (kUnknown for the unk token), others
//     kUserDefined; lstrip / rstrip honoured; single_word is Unimplemented. Ids missing from
//     both the vocab and added_tokens become kUnused placeholders.
//   post_processor: null, ByteLevel, TemplateProcessing (a SpecialToken before $A sets bos and
//     add_bos, one after it eos and add_eos) or a Sequence of these.
// tokenizer.json does not name bos/eos unless the post-processor adds them; otherwise they are
// guessed from well-known names ("<s>", "<|begin_of_text|>", "</s>", "<|endoftext|>", ...).
//
// Thread-safe (a pure function).
#ifndef PAGELLM_COMMON_TOKENIZER_HF_TOKENIZER_JSON_H_
#define PAGELLM_COMMON_TOKENIZER_HF_TOKENIZER_JSON_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "common/tokenizer/vocab_spec.h"

namespace pagellm {

// Parses `json` (the text of a tokenizer.json). InvalidArgument for malformed JSON or an
// inconsistent vocabulary (duplicate ids, negative ids, ...), Unimplemented as above.
// Tokenizer::Create() validates the rest.
absl::StatusOr<VocabSpec> VocabSpecFromHfTokenizerJson(std::string_view json);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_TOKENIZER_HF_TOKENIZER_JSON_H_
