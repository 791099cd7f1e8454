// SpecialTokenMatcher: finds added tokens (control, unknown and user-defined tokens) in text
// before any other tokenization, the way HF tokenizers' AddedVocabulary does: scan left to
// right, at each position take the longest token that starts there (leftmost-longest), skip
// over it, and continue. Special tokens found while special-token parsing is off are left in
// the text as plain characters (they still win over shorter user-defined tokens overlapping
// them, as in HF).
//
// Thread-safe after construction: Split() is const.
#ifndef PAGELLM_COMMON_TOKENIZER_SPECIAL_TOKEN_MATCHER_H_
#define PAGELLM_COMMON_TOKENIZER_SPECIAL_TOKEN_MATCHER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace pagellm {

class SpecialTokenMatcher {
 public:
  struct Entry {
    std::string text;  // non-empty
    int32_t id;
    bool special = false;  // matched only when parse_special
    bool lstrip = false;   // also swallow whitespace before the match
    bool rstrip = false;   // also swallow whitespace after the match
  };
  // A piece of the input: raw text to tokenize (id == -1) or one matched token.
  struct Fragment {
    std::string_view text;
    int32_t id = -1;
  };

  SpecialTokenMatcher() = default;
  // Entries with empty text are ignored; for duplicate texts the first entry wins.
  explicit SpecialTokenMatcher(const std::vector<Entry>& entries);

  // Appends the fragments of `text` to `out`, in order; raw fragments are never empty.
  // REQUIRES: `text` is valid UTF-8.
  void Split(std::string_view text, bool parse_special, std::vector<Fragment>* out) const;

  // Bytes of the longest special entry (one matched only when parse_special) that starts at
  // text[pos]; 0 when none does. REQUIRES: pos < text.size().
  [[nodiscard]] size_t LongestSpecialAt(std::string_view text, size_t pos) const;

  [[nodiscard]] bool empty() const { return entries_.empty(); }

 private:
  // Byte trie: node 0 is the root.
  int32_t Child(int32_t node, uint8_t byte) const {
    auto it = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
    return it == edges_.end() ? -1 : it->second;
  }

  std::vector<Entry> entries_;
  std::vector<int32_t> terminal_;                 // per node: index into entries_, or -1
  absl::flat_hash_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> node
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_TOKENIZER_SPECIAL_TOKEN_MATCHER_H_
