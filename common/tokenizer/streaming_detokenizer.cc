// Equivalence with Decode(): Decode sanitizes the whole byte string left to right, and the
// decision for each sequence depends only on its own bytes (at most 4), so sanitizing
// incrementally while holding back a trailing sequence that may still complete gives the same
// text. The leading-space strip looks only at the first byte, which the first non-empty piece
// supplies.
#include "common/tokenizer/streaming_detokenizer.h"

#include "common/utf8.h"

namespace pagellm {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer* tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamingDetokenizer::Feed(int32_t id) {
  std::string out;
  if (skip_special_ && tokenizer_->IsSpecial(id)) return out;
  std::string_view piece = tokenizer_->TokenPiece(id);
  if (piece.empty()) return out;
  if (at_start_) {
    at_start_ = false;
    if (tokenizer_->strips_leading_space() && piece[0] == ' ') piece.remove_prefix(1);
  }
  pending_.append(piece);
  const size_t used = AppendSanitizedUtf8(pending_, /*at_end=*/false, &out);
  pending_.erase(0, used);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out;
  AppendSanitizedUtf8(pending_, /*at_end=*/true, &out);
  Reset();
  return out;
}

void StreamingDetokenizer::Reset() {
  pending_.clear();
  at_start_ = true;
}

}  // namespace pagellm
