#include "common/tokenizer/byte_level.h"

#include <array>

#include "common/utf8.h"

namespace pagellm {
namespace {

// Bytes 33..126, 161..172 and 174..255 stand for themselves (as code points); the other 68
// bytes take code points 256, 257, ... in increasing byte order.
struct Tables {
  std::array<std::string, 256> spelling;
  std::array<int16_t, 324> byte_of_codepoint;  // -1 when not in the alphabet

  Tables() {
    byte_of_codepoint.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      const uint32_t cp = self ? b : next++;
      AppendCodepoint(cp, &spelling[b]);
      byte_of_codepoint[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables* const tables = new Tables();
  return *tables;
}

}  // namespace

std::string_view ByteLevelChar(uint8_t b) { return GetTables().spelling[b]; }

void ByteLevelEncode(std::string_view raw, std::string* out) {
  const Tables& t = GetTables();
  for (char c : raw) out->append(t.spelling[static_cast<uint8_t>(c)]);
}

bool ByteLevelDecode(std::string_view text, std::string* out) {
  const Tables& t = GetTables();
  const size_t old_size = out->size();
  size_t pos = 0;
  while (pos < text.size()) {
    const auto b0 = static_cast<uint8_t>(text[pos]);
    uint32_t cp;
    if (b0 < 0x80) {
      cp = b0;
      pos += 1;
    } else if ((b0 & 0xE0) == 0xC0 && pos + 1 < text.size() &&
               (static_cast<uint8_t>(text[pos + 1]) & 0xC0) == 0x80) {
      // Every code point of the alphabet is below U+0800, so two bytes at most.
      cp = ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(text[pos + 1]) & 0x3Fu);
      pos += 2;
    } else {
      cp = UINT32_MAX;
    }
    if (cp >= t.byte_of_codepoint.size() || t.byte_of_codepoint[cp] < 0) {
      out->resize(old_size);
      return false;
    }
    out->push_back(static_cast<char>(t.byte_of_codepoint[cp]));
  }
  return true;
}

}  // namespace pagellm
