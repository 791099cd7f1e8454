#include "common/structured/token_vocabulary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pagellm::structured {

absl::StatusOr<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::Create(
    int32_t vocab_size, const std::function<std::string_view(int32_t)>& bytes,
    const std::function<bool(int32_t)>& producible) {
  if (vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("token vocabulary of size ", vocab_size));
  }
  std::shared_ptr<TokenVocabulary> v(new TokenVocabulary());
  v->vocab_size_ = vocab_size;
  v->offsets_.reserve(vocab_size + 1);
  for (int32_t id = 0; id < vocab_size; ++id) {
    v->offsets_.push_back(static_cast<uint32_t>(v->bytes_.size()));
    if (!producible(id)) continue;
    const std::string_view b = bytes(id);
    if (b.empty()) continue;
    v->bytes_.append(b);
    v->sorted_ids_.push_back(id);
    v->max_len_ = std::max(v->max_len_, static_cast<int32_t>(b.size()));
  }
  v->offsets_.push_back(static_cast<uint32_t>(v->bytes_.size()));
  std::sort(v->sorted_ids_.begin(), v->sorted_ids_.end(), [&](int32_t a, int32_t b) {
    const auto ba = v->TokenBytes(a), bb = v->TokenBytes(b);
    return ba != bb ? ba < bb : a < b;
  });
  v->lcp_.assign(v->sorted_ids_.size(), 0);
  for (size_t i = 1; i < v->sorted_ids_.size(); ++i) {
    const std::string_view a = v->sorted_bytes(static_cast<int32_t>(i - 1));
    const std::string_view b = v->sorted_bytes(static_cast<int32_t>(i));
    int32_t k = 0;
    while (k < static_cast<int32_t>(std::min(a.size(), b.size())) && a[k] == b[k]) ++k;
    v->lcp_[i] = k;
  }
  return v;
}

}  // namespace pagellm::structured
