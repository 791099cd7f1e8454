// The model's default sampling parameters as pagellm-worker's flags give them (worker_main.cc),
// with vLLM's flags and meanings:
//   --generation-config auto    the checkpoint's generation_config.json (the default); GGUF files
//                               carry none
//   --generation-config vllm    none: the API's defaults
//   --generation-config DIR     DIR/generation_config.json (which must exist)
//   --override-generation-config JSON   fields set over the above, e.g.
//                               '{"temperature": 0.5, "max_new_tokens": 512}'
// A request's own values win over the defaults (common/api/sampling_defaults.h). Besides being the
// chat default, a max_new_tokens caps every request's max_tokens when it comes from the override
// or from a DIR (vLLM's override_max_tokens).
#ifndef PAGELLM_WORKER_SERVER_GENERATION_DEFAULTS_H_
#define PAGELLM_WORKER_SERVER_GENERATION_DEFAULTS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "pagellm/v1/generation.pb.h"

namespace pagellm {

struct GenerationDefaults {
  v1::SamplingParams sampling;   // ModelInfo.default_sampling
  int32_t max_tokens_limit = 0;  // ModelInfo.max_tokens_limit (0: none)
  std::string source;            // where they came from, for the start-up log
};

// Reads DIR/generation_config.json: its text, nullopt when there is none (ReadGenerationConfig).
using GenerationConfigReader =
    std::function<absl::StatusOr<std::optional<std::string>>(const std::string& dir)>;

// `mode` and `override_json` as the flags above; `model_file` is the checkpoint's
// generation_config.json. InvalidArgument for a file or override MergeGenerationConfig refuses, a
// DIR without the file, or an empty mode.
absl::StatusOr<GenerationDefaults> ResolveGenerationDefaults(
    std::string_view mode, std::string_view override_json,
    const std::optional<std::string>& model_file, const GenerationConfigReader& read_dir);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_SERVER_GENERATION_DEFAULTS_H_
