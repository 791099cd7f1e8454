#include "worker/server/generation_defaults.h"

#include "absl/strings/str_cat.h"
#include "common/api/sampling_defaults.h"
#include "common/status_macros.h"

namespace pagellm {

absl::StatusOr<GenerationDefaults> ResolveGenerationDefaults(
    std::string_view mode, std::string_view override_json,
    const std::optional<std::string>& model_file, const GenerationConfigReader& read_dir) {
  if (mode.empty()) {
    return absl::InvalidArgumentError(
        "--generation-config must be auto, vllm or a directory, not empty");
  }
  GenerationDefaults out;
  const bool from_dir = mode != "auto" && mode != "vllm";
  if (mode == "auto" && model_file.has_value()) {
    RETURN_IF_ERROR(MergeGenerationConfig(*model_file, "generation_config.json", &out.sampling));
    out.source = "the model's generation_config.json";
  } else if (from_dir) {
    const std::string dir(mode);
    ASSIGN_OR_RETURN(std::optional<std::string> text, read_dir(dir));
    if (!text.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--generation-config ", dir, ": no generation_config.json there"));
    }
    const std::string source = absl::StrCat(dir, "/generation_config.json");
    RETURN_IF_ERROR(MergeGenerationConfig(*text, source, &out.sampling));
    out.source = source;
  }
  if (!override_json.empty()) {
    v1::SamplingParams only_override;
    RETURN_IF_ERROR(
        MergeGenerationConfig(override_json, "--override-generation-config", &only_override));
    RETURN_IF_ERROR(
        MergeGenerationConfig(override_json, "--override-generation-config", &out.sampling));
    out.source = out.source.empty() ? "--override-generation-config"
                                    : absl::StrCat(out.source, " and --override-generation-config");
    if (only_override.has_max_tokens()) out.max_tokens_limit = only_override.max_tokens();
  }
  if (from_dir && out.sampling.has_max_tokens()) out.max_tokens_limit = out.sampling.max_tokens();
  if (out.source.empty()) out.source = "none";
  return out;
}

}  // namespace pagellm
