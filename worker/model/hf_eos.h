// The end-of-generation token ids a Hugging Face checkpoint names besides its tokenizer's EOS,
// read as vLLM reads them: generation_config.json's eos_token_id (an id or a list; Llama 3.1
// Instruct lists <|end_of_text|>, <|eom_id|> and <|eot_id|>), or, for a checkpoint without that
// file, config.json's, where an absent eos_token_id is the architecture's default (2 for llama
// and mistral, none for qwen2: transformers' config classes). vLLM stops a request at these ids
// unless it sets ignore_eos (SamplingParams.update_from_generation_config); pagellm adds them to
// the tokenizer's end-of-generation set (VocabSpec::eog_ids), so the engine, the grammar and the
// router all see them.
//
// Thread-safe: pure functions.
#ifndef PAGELLM_WORKER_MODEL_HF_EOS_H_
#define PAGELLM_WORKER_MODEL_HF_EOS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pagellm {

// More would be no model's: the lists hold a few ids.
inline constexpr size_t kMaxEosTokenIds = 1024;

// eos_token_id of a generation_config.json: sorted, without repeats; empty when absent or null.
// InvalidArgument naming `source` for text that is not a JSON object, or an eos_token_id that is
// not a non-negative 32-bit id or a list of at most kMaxEosTokenIds of them.
absl::StatusOr<std::vector<int32_t>> EosIdsFromGenerationConfig(std::string_view json,
                                                                std::string_view source);

// The same from a config.json, with the architecture's default when eos_token_id is absent.
absl::StatusOr<std::vector<int32_t>> EosIdsFromConfigJson(std::string_view json,
                                                          std::string_view source);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_HF_EOS_H_
