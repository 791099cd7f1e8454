#include "common/tokenizer/special_token_matcher.h"

namespace pagellm {
namespace {

// Unicode White_Space (what Rust's char::is_whitespace tests, which HF's lstrip/rstrip use).
bool IsWhiteSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Decodes the character at text[pos] (valid UTF-8); sets *len.
uint32_t DecodeAt(std::string_view text, size_t pos, size_t* len) {
  const auto b = static_cast<uint8_t>(text[pos]);
  if (b < 0x80) {
    *len = 1;
    return b;
  }
  const size_t n = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  uint32_t cp = b & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  *len = n;
  return cp;
}

// Start of the run of whitespace characters that ends at `end`, not before `floor`.
size_t WhiteSpaceRunStart(std::string_view text, size_t floor, size_t end) {
  size_t start = end;
  while (start > floor) {
    size_t p = start - 1;
    while (p > floor && (static_cast<uint8_t>(text[p]) & 0xC0) == 0x80) --p;
    size_t len;
    if (!IsWhiteSpace(DecodeAt(text, p, &len))) break;
    start = p;
  }
  return start;
}

size_t WhiteSpaceRunEnd(std::string_view text, size_t begin) {
  size_t end = begin;
  while (end < text.size()) {
    size_t len;
    if (!IsWhiteSpace(DecodeAt(text, end, &len))) break;
    end += len;
  }
  return end;
}

}  // namespace

SpecialTokenMatcher::SpecialTokenMatcher(const std::vector<Entry>& entries) {
  terminal_.push_back(-1);
  for (const Entry& e : entries) {
    if (e.text.empty()) continue;
    int32_t node = 0;
    for (char c : e.text) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
      auto [it, inserted] = edges_.try_emplace(key, static_cast<int32_t>(terminal_.size()));
      if (inserted) terminal_.push_back(-1);
      node = it->second;
    }
    if (terminal_[node] >= 0) continue;
    terminal_[node] = static_cast<int32_t>(entries_.size());
    entries_.push_back(e);
  }
}

size_t SpecialTokenMatcher::LongestSpecialAt(std::string_view text, size_t pos) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = Child(node, static_cast<uint8_t>(text[i]));
    if (node < 0) break;
    if (terminal_[node] >= 0 && entries_[terminal_[node]].special) best = i + 1 - pos;
  }
  return best;
}

void SpecialTokenMatcher::Split(std::string_view text, bool parse_special,
                                std::vector<Fragment>* out) const {
  size_t raw_start = 0;  // start of the pending raw fragment
  size_t pos = 0;
  while (pos < text.size()) {
    // Longest entry starting at `pos`.
    int32_t best = -1;
    size_t best_end = 0;
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = Child(node, static_cast<uint8_t>(text[i]));
      if (node < 0) break;
      if (terminal_[node] >= 0) {
        best = terminal_[node];
        best_end = i + 1;
      }
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const Entry& e = entries_[best];
    if (e.special && !parse_special) {
      pos = best_end;  // stays raw text; no match may start inside it
      continue;
    }
    const size_t begin = e.lstrip ? WhiteSpaceRunStart(text, raw_start, pos) : pos;
    const size_t end = e.rstrip ? WhiteSpaceRunEnd(text, best_end) : best_end;
    if (begin > raw_start) out->push_back({text.substr(raw_start, begin - raw_start), -1});
    out->push_back({text.substr(begin, end - begin), e.id});
    raw_start = pos = end;
  }
  if (raw_start < text.size()) out->push_back({text.substr(raw_start), -1});
}

}  // namespace pagellm
