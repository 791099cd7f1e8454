// Streaming text that may contain markup tags (<tool_call>, </think>, ...): how much of a
// text's end must be held back because it may still become a tag.
//
// Thread-safe: a pure function.
#ifndef PAGELLM_ROUTER_HTTP_PARTIAL_TAG_H_
#define PAGELLM_ROUTER_HTTP_PARTIAL_TAG_H_

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace pagellm {

// The length of the longest tail of `text` that is a proper prefix of `tag`: 0 when no tail
// can still become `tag`.
inline size_t PartialTagSuffix(std::string_view text, std::string_view tag) {
  if (tag.empty()) return 0;
  for (size_t keep = std::min(text.size(), tag.size() - 1); keep > 0; --keep) {
    if (text.substr(text.size() - keep) == tag.substr(0, keep)) return keep;
  }
  return 0;
}

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_PARTIAL_TAG_H_
