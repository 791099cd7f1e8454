#include "common/utf8.h"

namespace pagellm {
namespace {

// Describes the sequence a lead byte starts: its total length and the allowed range of the
// second byte (later bytes are always 80..BF). len 0 marks a byte that cannot start one.
struct Lead {
  int len;
  uint8_t lo, hi;
};

Lead LeadOf(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Examines the sequence at in[pos]. Returns the number of bytes it spans and sets *valid.
// When the input ends inside a sequence that is valid so far, sets *truncated.
size_t ScanOne(std::string_view in, size_t pos, bool* valid, bool* truncated) {
  *truncated = false;
  const Lead lead = LeadOf(static_cast<uint8_t>(in[pos]));
  if (lead.len <= 1) {
    *valid = lead.len == 1;
    return 1;
  }
  size_t n = 1;
  for (; n < static_cast<size_t>(lead.len); ++n) {
    if (pos + n >= in.size()) {
      *truncated = true;
      *valid = false;
      return n;
    }
    const auto c = static_cast<uint8_t>(in[pos + n]);
    const uint8_t lo = n == 1 ? lead.lo : 0x80;
    const uint8_t hi = n == 1 ? lead.hi : 0xBF;
    if (c < lo || c > hi) {
      *valid = false;
      return n;  // the maximal subpart ends before the offending byte
    }
  }
  *valid = true;
  return n;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    bool valid, truncated;
    pos += ScanOne(s, pos, &valid, &truncated);
    if (!valid) return false;
  }
  return true;
}

size_t AppendSanitizedUtf8(std::string_view in, bool at_end, std::string* out) {
  size_t pos = 0;
  size_t run = 0;  // start of the pending run of valid bytes
  while (pos < in.size()) {
    if (static_cast<uint8_t>(in[pos]) < 0x80) {
      ++pos;
      continue;
    }
    bool valid, truncated;
    const size_t n = ScanOne(in, pos, &valid, &truncated);
    if (valid) {
      pos += n;
      continue;
    }
    out->append(in.data() + run, pos - run);
    if (truncated && !at_end) return pos;
    out->append(kReplacementChar);
    pos += n;
    run = pos;
  }
  out->append(in.data() + run, pos - run);
  return pos;
}

std::string SanitizeUtf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  AppendSanitizedUtf8(in, /*at_end=*/true, &out);
  return out;
}

void AppendCodepoint(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace pagellm
