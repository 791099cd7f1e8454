#include "common/prefix_cache/block_hash.h"

#include <algorithm>

namespace pagellm {
namespace {

constexpr uint64_t kRootHash = 0x6a09e667f3bcc909ULL;

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

}  // namespace

uint64_t PrefixCacheRoot(uint64_t cache_namespace) {
  return cache_namespace == 0 ? kRootHash : Mix(kRootHash, ~cache_namespace);
}

uint64_t PrefixCacheNamespace(std::string_view adapter_name) {
  if (adapter_name.empty()) return 0;
  uint64_t h = Mix(kRootHash, adapter_name.size());
  for (unsigned char c : adapter_name) h = Mix(h, c);
  return h == 0 ? 1 : h;
}

uint64_t SaltedCacheNamespace(uint64_t cache_namespace, std::string_view cache_salt) {
  if (cache_salt.empty()) return cache_namespace;
  uint64_t h = Mix(Mix(kRootHash, ~cache_namespace), cache_salt.size());
  for (unsigned char c : cache_salt) h = Mix(h, c);
  return h == 0 ? 1 : h;
}

uint64_t HashPrefixBlock(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = Mix(kRootHash, parent);
  for (int32_t t : tokens) h = Mix(h, static_cast<uint32_t>(t));
  return h;
}

std::vector<uint64_t> PrefixBlockHashes(std::span<const int32_t> tokens, int64_t block_size,
                                        uint64_t cache_namespace, int64_t max_blocks) {
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(tokens.size()) / block_size, max_blocks);
  std::vector<uint64_t> hashes;
  hashes.reserve(static_cast<size_t>(std::max<int64_t>(n, 0)));
  uint64_t parent = PrefixCacheRoot(cache_namespace);
  for (int64_t i = 0; i < n; ++i) {
    parent = HashPrefixBlock(parent, tokens.subspan(i * block_size, block_size));
    hashes.push_back(parent);
  }
  return hashes;
}

}  // namespace pagellm
