// Bloom filters of prefix-cache block hashes (block_hash.h): how a worker tells the router which
// prefixes it holds, in a few bits per cached block, so that the router can send a request to the
// worker that already has the longest part of its prompt (cache-aware routing).
//
// CountingPrefixFilter is the worker's: the BlockManager adds a block's hash when it caches the
// block and removes it when it evicts it (8-bit counters, saturating: a saturated counter is never
// decremented, so the filter only ever errs towards "may contain"). Its bit array is kept in
// atomic words beside the counters, so any thread can Snapshot() it while the engine thread
// updates it, without a lock. The version changes whenever a bit does; a router that holds the
// current version need not fetch the bits again.
//
// PrefixFilterView is the router's read-only copy of one snapshot. Hostile-input rules: Parse
// refuses sizes that are not a power of two or exceed kMaxBits, and hash counts outside [1, 16].
//
// A filter never misses a hash it holds (no false negatives). With m bits, n hashes and k = 6
// probes, a hash it does not hold looks present with probability (1 - e^(-6n/m))^6: sized at 16
// bits per block of the pool (the most it can cache), under 0.1% when full.
#ifndef PAGELLM_COMMON_PREFIX_CACHE_PREFIX_FILTER_H_
#define PAGELLM_COMMON_PREFIX_CACHE_PREFIX_FILTER_H_

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pagellm {

inline constexpr int64_t kPrefixFilterMinBits = int64_t{1} << 12;
inline constexpr int64_t kPrefixFilterMaxBits = int64_t{1} << 23;  // 1 MiB on the wire
inline constexpr int kPrefixFilterHashes = 6;

class CountingPrefixFilter {
 public:
  // Sized for `capacity` hashes at once (the device pool's block count): the next power of two
  // of at least 16 bits each, within [kPrefixFilterMinBits, kPrefixFilterMaxBits]. Versions start
  // at `first_version` (pass a random one so that a restarted worker's are new).
  CountingPrefixFilter(int64_t capacity, uint64_t first_version);
  CountingPrefixFilter(const CountingPrefixFilter&) = delete;
  CountingPrefixFilter& operator=(const CountingPrefixFilter&) = delete;

  // One thread only (the owner's), no allocation.
  void Add(uint64_t hash);
  // REQUIRES: `hash` was added and not yet removed as often as added.
  void Remove(uint64_t hash);

  // Any thread.
  [[nodiscard]] uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // Copies the bit array (little-endian 64-bit words) into *bits and returns the version it is at
  // least as new as.
  uint64_t Snapshot(std::string* bits) const;
  [[nodiscard]] int64_t num_bits() const { return static_cast<int64_t>(words_.size()) * 64; }

 private:
  const uint64_t mask_;
  std::vector<uint8_t> counters_;
  std::vector<std::atomic<uint64_t>> words_;
  std::atomic<uint64_t> version_;
};

class PrefixFilterView {
 public:
  PrefixFilterView() = default;  // empty: contains nothing

  // `bits` as CountingPrefixFilter::Snapshot wrote them, probed `num_hashes` times per hash.
  static absl::StatusOr<PrefixFilterView> Parse(std::string bits, int num_hashes);

  [[nodiscard]] bool MayContain(uint64_t hash) const;
  // How many of `chain`'s leading hashes it may contain (a prefix cache hit needs all the
  // earlier blocks too).
  [[nodiscard]] int64_t MatchedPrefix(std::span<const uint64_t> chain) const;
  [[nodiscard]] bool empty() const { return bits_.empty(); }

 private:
  std::string bits_;
  uint64_t mask_ = 0;
  int num_hashes_ = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_PREFIX_CACHE_PREFIX_FILTER_H_
