#include "worker/flags/lora_modules.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/sampling/sampling_params.h"
#include "common/status_macros.h"

namespace pagellm::cli {

absl::StatusOr<std::vector<LoraModuleSpec>> ParseLoraModules(
    const std::vector<std::string>& entries) {
  std::vector<LoraModuleSpec> out;
  absl::flat_hash_set<std::string> names;
  for (const std::string& entry : entries) {
    if (entry.empty()) continue;  // "--lora-modules=" or a trailing comma
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--lora-modules entry '", entry.substr(0, 200), "' is not NAME=PATH"));
    }
    LoraModuleSpec spec{entry.substr(0, eq), entry.substr(eq + 1)};
    RETURN_IF_ERROR(CheckLoraAdapterName(spec.name, "--lora-modules name"));
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--lora-modules names '", spec.name, "' twice"));
    }
    out.push_back(std::move(spec));
  }
  if (out.size() > kMaxLoraModules) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lora-modules lists ", out.size(), " adapters; at most ", kMaxLoraModules));
  }
  return out;
}

}  // namespace pagellm::cli
