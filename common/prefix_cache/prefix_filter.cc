#include "common/prefix_cache/prefix_filter.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pagellm {
namespace {

// Probe i of `hash`: double hashing on its two halves (block hashes are well mixed already).
inline uint64_t Probe(uint64_t hash, int i, uint64_t mask) {
  const uint64_t lo = hash & 0xffffffffULL;
  const uint64_t hi = (hash >> 32) | 1;
  return (lo + static_cast<uint64_t>(i) * hi) & mask;
}

int64_t FilterBits(int64_t capacity) {
  const uint64_t want = static_cast<uint64_t>(std::clamp<int64_t>(
      capacity > kPrefixFilterMaxBits / 16 ? kPrefixFilterMaxBits : capacity * 16,
      kPrefixFilterMinBits, kPrefixFilterMaxBits));
  return static_cast<int64_t>(std::bit_ceil(want));
}

}  // namespace

CountingPrefixFilter::CountingPrefixFilter(int64_t capacity, uint64_t first_version)
    : mask_(static_cast<uint64_t>(FilterBits(capacity)) - 1),
      counters_(mask_ + 1, 0),
      words_((mask_ + 1) / 64),
      version_(first_version) {
  for (auto& w : words_) w.store(0, std::memory_order_relaxed);
}

void CountingPrefixFilter::Add(uint64_t hash) {
  bool changed = false;
  for (int i = 0; i < kPrefixFilterHashes; ++i) {
    const uint64_t bit = Probe(hash, i, mask_);
    uint8_t& c = counters_[bit];
    if (c == 255) continue;  // saturated: stays set for good
    if (c++ == 0) {
      words_[bit / 64].fetch_or(uint64_t{1} << (bit % 64), std::memory_order_relaxed);
      changed = true;
    }
  }
  if (changed) version_.fetch_add(1, std::memory_order_release);
}

void CountingPrefixFilter::Remove(uint64_t hash) {
  bool changed = false;
  for (int i = 0; i < kPrefixFilterHashes; ++i) {
    const uint64_t bit = Probe(hash, i, mask_);
    uint8_t& c = counters_[bit];
    if (c == 255 || c == 0) continue;
    if (--c == 0) {
      words_[bit / 64].fetch_and(~(uint64_t{1} << (bit % 64)), std::memory_order_relaxed);
      changed = true;
    }
  }
  if (changed) version_.fetch_add(1, std::memory_order_release);
}

uint64_t CountingPrefixFilter::Snapshot(std::string* bits) const {
  const uint64_t v = version_.load(std::memory_order_acquire);
  bits->resize(words_.size() * 8);
  char* out = bits->data();
  for (size_t i = 0; i < words_.size(); ++i) {
    const uint64_t w = words_[i].load(std::memory_order_relaxed);
    for (int b = 0; b < 8; ++b) out[i * 8 + b] = static_cast<char>((w >> (8 * b)) & 0xff);
  }
  return v;
}

absl::StatusOr<PrefixFilterView> PrefixFilterView::Parse(std::string bits, int num_hashes) {
  const uint64_t n = bits.size();
  if (n < 8 || !std::has_single_bit(n) || n * 8 > static_cast<uint64_t>(kPrefixFilterMaxBits)) {
    return absl::InvalidArgumentError(absl::StrCat("a prefix filter of ", n,
                                                   " bytes (a power of two from 8 to ",
                                                   kPrefixFilterMaxBits / 8, ")"));
  }
  if (num_hashes < 1 || num_hashes > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("a prefix filter with ", num_hashes, " hashes (1 to 16)"));
  }
  PrefixFilterView view;
  view.bits_ = std::move(bits);
  view.mask_ = n * 8 - 1;
  view.num_hashes_ = num_hashes;
  return view;
}

bool PrefixFilterView::MayContain(uint64_t hash) const {
  if (bits_.empty()) return false;
  for (int i = 0; i < num_hashes_; ++i) {
    const uint64_t bit = Probe(hash, i, mask_);
    if ((static_cast<uint8_t>(bits_[bit / 8]) >> (bit % 8) & 1) == 0) return false;
  }
  return true;
}

int64_t PrefixFilterView::MatchedPrefix(std::span<const uint64_t> chain) const {
  int64_t n = 0;
  while (n < static_cast<int64_t>(chain.size()) && MayContain(chain[n])) ++n;
  return n;
}

}  // namespace pagellm
