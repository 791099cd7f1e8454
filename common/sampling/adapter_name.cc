// CheckLoraAdapterName (sampling_params.h), alone so that a fuzzer of the request parsers can
// link it without the rest of the sampling parameters.
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/sampling/sampling_params.h"

namespace pagellm {

absl::Status CheckLoraAdapterName(std::string_view name, std::string_view what) {
  const std::string w(what);
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(w.c_str(), " is empty"));
  if (name.size() > kMaxLoraAdapterNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        w.c_str(), " '", std::string(name.substr(0, 40)).c_str(), "...' is over 128 bytes"));
  }
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != ':' &&
        c != '/' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat(w.c_str(), " '", std::string(name).c_str(),
                       "' may hold only letters, digits and . _ : / -"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pagellm
