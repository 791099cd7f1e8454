// --speculative-config: vLLM's JSON spelling of speculative decoding, for the method pagellm
// serves, n-gram prompt lookup:
//   {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4,
//    "prompt_lookup_min": 2, "disable_by_batch_size": 16}
// As vLLM: num_speculative_tokens is required; with neither prompt_lookup bound both are 5,
// with one the other equals it. Other methods (draft models, EAGLE, MTP, ...) and unknown keys
// are refused by name, as is any value out of NgramOptions::Validate's ranges.
#ifndef PAGELLM_WORKER_FLAGS_SPECULATIVE_CONFIG_H_
#define PAGELLM_WORKER_FLAGS_SPECULATIVE_CONFIG_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "worker/engine/ngram_proposer.h"

namespace pagellm::cli {

// Empty text: speculation off (num_speculative_tokens 0). InvalidArgument otherwise on error.
absl::StatusOr<NgramOptions> ParseSpeculativeConfig(std::string_view json);

}  // namespace pagellm::cli

#endif  // PAGELLM_WORKER_FLAGS_SPECULATIVE_CONFIG_H_
