// VocabFromGguf: reads a GGUF file's tokenizer.ggml.* metadata into a VocabSpec.
//
// Keys: tokenizer.ggml.model ("gpt2" -> byte-level BPE, "llama" -> SentencePiece BPE; others
// Unimplemented), .pre (default "default"; byte-level only, an unknown name is Unimplemented),
// .tokens (required), .scores, .token_type, .merges (required for "gpt2"), .bos_token_id,
// .eos_token_id, .unknown_token_id, .padding_token_id, .eot_token_id, .eom_token_id,
// .add_bos_token, .add_eos_token, .add_space_prefix. Defaults follow llama.cpp: SentencePiece
// adds BOS and a space prefix unless the file says otherwise; byte-level BPE adds BOS only for
// the Llama 3 pre-tokenizers, never a space prefix.
//
// Thread-safe (a pure function of the file).
#ifndef PAGELLM_WORKER_MODEL_GGUF_VOCAB_H_
#define PAGELLM_WORKER_MODEL_GGUF_VOCAB_H_

#include "absl/status/statusor.h"
#include "common/tokenizer/vocab_spec.h"
#include "worker/model/gguf_file.h"

namespace pagellm {

// Returns the vocabulary of `gguf`. InvalidArgument when a key has the wrong type or an array
// the wrong length, NotFound when tokenizer.ggml.model or .tokens is missing, Unimplemented for
// an unsupported model or pre-tokenizer. Tokenizer::Create() checks the rest (ids, merges).
absl::StatusOr<VocabSpec> VocabFromGguf(const GgufFile& gguf);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_GGUF_VOCAB_H_
