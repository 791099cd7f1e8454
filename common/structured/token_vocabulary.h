// TokenVocabulary: the bytes each token of a model's vocabulary stands for, sorted so that a
// grammar matcher can test every token against a state while sharing the work of common
// prefixes (grammar_matcher.h).
//
// Immutable after Create; thread-safe.
#ifndef PAGELLM_COMMON_STRUCTURED_TOKEN_VOCABULARY_H_
#define PAGELLM_COMMON_STRUCTURED_TOKEN_VOCABULARY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pagellm::structured {

class TokenVocabulary {
 public:
  // `bytes(id)` for every id in [0, vocab_size): the token's bytes in decoded text. Tokens for
  // which `producible(id)` is false (special and unused tokens) and empty ones are never
  // produced under a grammar. InvalidArgument for a vocab_size below 1.
  static absl::StatusOr<std::shared_ptr<const TokenVocabulary>> Create(
      int32_t vocab_size, const std::function<std::string_view(int32_t)>& bytes,
      const std::function<bool(int32_t)>& producible);

  [[nodiscard]] int32_t vocab_size() const { return vocab_size_; }
  // Mask words: ceil(vocab_size / 64).
  [[nodiscard]] int32_t mask_words() const { return (vocab_size_ + 63) / 64; }
  // Producible tokens, sorted by their bytes.
  [[nodiscard]] int32_t num_sorted() const { return static_cast<int32_t>(sorted_ids_.size()); }
  [[nodiscard]] int32_t sorted_id(int32_t i) const { return sorted_ids_[i]; }
  [[nodiscard]] std::string_view sorted_bytes(int32_t i) const {
    return TokenBytes(sorted_ids_[i]);
  }
  // Bytes sorted token i shares with sorted token i - 1 (0 for i = 0).
  [[nodiscard]] int32_t common_prefix(int32_t i) const { return lcp_[i]; }
  [[nodiscard]] int32_t max_token_bytes() const { return max_len_; }
  // Empty for a token that is not producible or out of range.
  [[nodiscard]] std::string_view TokenBytes(int32_t id) const {
    if (id < 0 || id >= vocab_size_) return {};
    return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }

 private:
  TokenVocabulary() = default;
  int32_t vocab_size_ = 0;
  std::string bytes_;              // producible tokens' bytes, by id
  std::vector<uint32_t> offsets_;  // token id's bytes: bytes_[offsets_[id], offsets_[id + 1])
  std::vector<int32_t> sorted_ids_;
  std::vector<int32_t> lcp_;
  int32_t max_len_ = 0;
};

}  // namespace pagellm::structured

#endif  // PAGELLM_COMMON_STRUCTURED_TOKEN_VOCABULARY_H_
