// GPT-2 byte-level alphabet: each of the 256 byte values is spelled as one printable Unicode
// character in byte-level BPE vocabularies ("Ġ" for a space, "Ċ" for a newline, printable ASCII
// and most of Latin-1 as themselves).
//
// Thread-safe: the tables are built once, on first use, and never change.
#ifndef PAGELLM_COMMON_TOKENIZER_BYTE_LEVEL_H_
#define PAGELLM_COMMON_TOKENIZER_BYTE_LEVEL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace pagellm {

// Returns the character (as UTF-8) that spells byte `b`.
[[nodiscard]] std::string_view ByteLevelChar(uint8_t b);

// Appends the spelling of every byte of `raw` to `out`.
void ByteLevelEncode(std::string_view raw, std::string* out);

// Maps a byte-level token text back to raw bytes, appending them to `out`. Returns false and
// leaves `out` unchanged when `text` contains a character outside the alphabet (e.g. added
// tokens, whose text is already raw).
bool ByteLevelDecode(std::string_view text, std::string* out);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_TOKENIZER_BYTE_LEVEL_H_
