// StreamingDetokenizer: turns generated token ids into text one id at a time. Each Feed()
// returns only complete, valid UTF-8: bytes of a character split across tokens are held back
// until the character is complete; bytes that cannot become valid come out as U+FFFD as soon as
// that is certain. The concatenation of every Feed() result and the final Flush() equals
// Tokenizer::Decode() of all the ids (same skip_special).
//
// Not thread-safe: one instance per sequence. Borrows the Tokenizer, which must outlive it.
#ifndef PAGELLM_COMMON_TOKENIZER_STREAMING_DETOKENIZER_H_
#define PAGELLM_COMMON_TOKENIZER_STREAMING_DETOKENIZER_H_

#include <cstdint>
#include <string>

#include "common/tokenizer/tokenizer.h"

namespace pagellm {

class StreamingDetokenizer {
 public:
  // `skip_special`: drop control and unknown tokens, as Decode(ids, true).
  explicit StreamingDetokenizer(const Tokenizer* tokenizer, bool skip_special = true);

  // Adds `id` and returns the text that became final (possibly empty).
  std::string Feed(int32_t id);
  // Returns what is still held back (an incomplete character becomes U+FFFD) and resets the
  // detokenizer to its initial state.
  std::string Flush();
  // Forgets everything fed so far.
  void Reset();

  // Bytes held back, waiting for the rest of a character.
  [[nodiscard]] size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;   // undecided bytes (a prefix of one UTF-8 character)
  bool at_start_ = true;  // no byte seen yet (for the SentencePiece leading-space strip)
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_TOKENIZER_STREAMING_DETOKENIZER_H_
