// ModelFingerprint: the identity of what a worker serves, as far as a router is concerned. Two
// workers with the same fingerprint tokenize, template and stop alike, so a router may send a
// request validated for one to the other. Limits (max_model_len, max_parallel_samples, block
// size) are not part of it: they may differ between workers of one model.
//
// Thread-safe: a pure function.
#ifndef PAGELLM_COMMON_API_MODEL_FINGERPRINT_H_
#define PAGELLM_COMMON_API_MODEL_FINGERPRINT_H_

#include <string>

#include "pagellm/v1/generation.pb.h"
#include "pagellm/v1/worker.pb.h"

namespace pagellm {

// SHA-256 (64 lowercase hex digits, OpenSSL) of info's model_name, vocab_size, eos_token_ids and
// chat_template and of the tokenizer spec, serialized deterministically.
std::string ModelFingerprint(const v1::ModelInfo& info, const v1::TokenizerSpec& tokenizer);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_API_MODEL_FINGERPRINT_H_
