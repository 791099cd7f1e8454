// Debian's Abseil (20220623) has its own absl::string_view, distinct from std::string_view;
// StrCat and heterogeneous hash-map lookups need it.
#ifndef PAGELLM_COMMON_TOKENIZER_ABSL_VIEW_H_
#define PAGELLM_COMMON_TOKENIZER_ABSL_VIEW_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace pagellm {

inline absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace pagellm

#endif  // PAGELLM_COMMON_TOKENIZER_ABSL_VIEW_H_
