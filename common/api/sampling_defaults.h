// A model's default sampling parameters, as vLLM takes them from generation_config.json
// (--generation-config auto, its default): a request's own value wins; what it leaves unset comes
// from the model (temperature 0.6 and top_p 0.9 for Llama 3.1 Instruct, for example) before the
// API's defaults. The defaults travel from worker to router in ModelInfo.default_sampling, a
// SamplingParams with only the fields the model sets.
//
// Fields: temperature, top_p, top_k, min_p, repetition_penalty, presence_penalty,
// frequency_penalty, and max_tokens (generation_config's max_new_tokens). Everything else in the
// file (token ids, do_sample, ...) is not a default: vLLM reads none of it for sampling either.
//
// Thread-safe: pure functions.
#ifndef PAGELLM_COMMON_API_SAMPLING_DEFAULTS_H_
#define PAGELLM_COMMON_API_SAMPLING_DEFAULTS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "pagellm/v1/generation.pb.h"

namespace pagellm {

// The most of a generation_config.json (or an override) that is read: they are a few hundred
// bytes.
inline constexpr size_t kMaxGenerationConfigBytes = 1 << 20;

// Sets in `defaults` the fields `json` (a generation_config.json, or
// --override-generation-config) gives, over those already there. A field that is absent or null
// is left as it was. InvalidArgument naming `source` and the field for text that is not a JSON
// object, a field of the wrong type, or a value no request could use (a temperature below 0, a
// top_p outside (0, 1], ...): a model's defaults are checked once, at start.
absl::Status MergeGenerationConfig(std::string_view json, std::string_view source,
                                   v1::SamplingParams* defaults);

// Fills the fields of `request` it leaves unset from `defaults`, max_tokens aside (its default
// depends on the prompt: see the router's validation).
void ApplySamplingDefaults(const v1::SamplingParams& defaults, v1::SamplingParams* request);

// "temperature=0.6 top_p=0.9" ("none" when empty), for the start-up log.
std::string DescribeSamplingDefaults(const v1::SamplingParams& defaults);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_API_SAMPLING_DEFAULTS_H_
