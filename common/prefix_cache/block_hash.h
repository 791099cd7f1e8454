// The prefix cache's block hashes, shared by the worker's BlockManager (which caches blocks under
// them) and the router (which predicts which worker already holds a prompt's prefix).
//
// A full block of `block_size` tokens is named by a chained 64-bit hash: block i's hash mixes
// block i-1's hash (for block 0: the root of the request's cache namespace) with the block's
// token ids. Equal hashes therefore name equal prefixes, not merely equal blocks. The namespace
// keeps blocks computed with different weights apart: 0 is the base model, and a LoRA adapter's
// namespace is PrefixCacheNamespace(its name), the same in every worker whatever order the
// adapters were listed in. A request's cache_salt salts its namespace (SaltedCacheNamespace).
//
// The hash is not cryptographic: the block manager verifies a hit's tokens, and the router only
// uses it to guess. Pure functions, thread-safe.
#ifndef PAGELLM_COMMON_PREFIX_CACHE_BLOCK_HASH_H_
#define PAGELLM_COMMON_PREFIX_CACHE_BLOCK_HASH_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace pagellm {

// The parent hash of a namespace's first block.
uint64_t PrefixCacheRoot(uint64_t cache_namespace);

// The namespace of a LoRA adapter's blocks (never 0); "" is the base model's, 0.
uint64_t PrefixCacheNamespace(std::string_view adapter_name);

// `cache_namespace` salted with a request's cache_salt: only requests of the same namespace and
// salt share blocks. The namespace itself for an empty salt; otherwise never 0.
uint64_t SaltedCacheNamespace(uint64_t cache_namespace, std::string_view cache_salt);

// The hash of the block holding `tokens` after the block hashed `parent`.
uint64_t HashPrefixBlock(uint64_t parent, std::span<const int32_t> tokens);

// The chained hashes of the full blocks of `tokens` (tokens.size() / block_size of them), at most
// `max_blocks`. REQUIRES: block_size > 0.
std::vector<uint64_t> PrefixBlockHashes(std::span<const int32_t> tokens, int64_t block_size,
                                        uint64_t cache_namespace, int64_t max_blocks = INT64_MAX);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_PREFIX_CACHE_BLOCK_HASH_H_
