// BlockManager: the KV memory manager of the vLLM paper. It maps each sequence to a block table
// (physical block ids) in one of two pools, the device pool and the swap pool (host memory for
// preempted sequences), and implements
// sharing (fork), copy-on-write, swapping of a sequence group and automatic prefix caching.
//
// It only does the bookkeeping: every operation that needs data moved returns the KvCopy
// operations for the caller to execute, in order, before the next forward pass. It links no
// kernel or device library.
//
// Queries are const and never change state; a mutation that fails returns a non-OK status and
// leaves the manager unchanged. Not thread-safe: owned by the single engine thread.
#ifndef PAGELLM_WORKER_KV_BLOCK_MANAGER_H_
#define PAGELLM_WORKER_KV_BLOCK_MANAGER_H_

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/prefix_cache/prefix_filter.h"
#include "worker/kv/block_allocator.h"
#include "worker/kv/kv_copy.h"

namespace pagellm {

class BlockManager {
 public:
  struct Options {
    int32_t num_device_blocks = 0;  // must be > 0
    int32_t num_swap_blocks = 0;    // swap pool; 0 disables swapping
    int32_t block_size = 16;        // tokens per block, > 0
    // Fraction of the device pool that CanAllocate keeps free so that running sequences can
    // still append (avoids preempting right after admitting). In [0, 1).
    double watermark = 0.01;
    bool enable_prefix_caching = true;
    // The first version of prefix_filter() (pass a random one: see prefix_filter.h).
    uint64_t prefix_filter_version = 0;
  };

  // Counters for the metrics. "free" device blocks include evictable prefix-cache blocks.
  struct Stats {
    int32_t device_used = 0;              // blocks some sequence table references
    int32_t device_free = 0;              // unreferenced + evictable cached; used + free = pool
    int32_t device_cached = 0;            // blocks held by the prefix cache
    int32_t device_cached_evictable = 0;  // ... of which no sequence uses
    int32_t swap_used = 0;
    int32_t swap_free = 0;
    int64_t prefix_cache_hit_tokens = 0;      // prompt tokens whose KV was reused
    int64_t prefix_cache_queried_tokens = 0;  // prompt tokens looked up (all allocated prompts)
  };

  // InvalidArgument for impossible options. The caller owns the result.
  static absl::StatusOr<std::unique_ptr<BlockManager>> Create(const Options& options);

  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  // ---- Queries ----

  // True when a new prompt of `num_prompt_tokens` fits while leaving the watermark free.
  // Conservative: ignores prefix-cache hits.
  [[nodiscard]] bool CanAllocate(int64_t num_prompt_tokens) const;
  // True when `num_blocks` new device blocks fit while leaving the watermark free.
  [[nodiscard]] bool CanAllocateBlocks(int64_t num_blocks) const;
  // True when every listed (device-resident) sequence can append one token at once, counting a
  // new block for each sequence whose last block is full or shared (copy-on-write).
  [[nodiscard]] bool CanAppendSlots(std::span<const int64_t> seq_ids) const;
  // Device blocks an allocation can take now: unreferenced plus evictable cached blocks.
  [[nodiscard]] int32_t NumFreeDeviceBlocks() const;
  [[nodiscard]] int32_t NumFreeSwapBlocks() const { return swap_.num_free(); }
  // True when the group's distinct device blocks fit in the swap pool.
  [[nodiscard]] bool CanSwapOut(std::span<const int64_t> group) const;
  // True when the group's distinct swap blocks fit in the device pool above the watermark.
  [[nodiscard]] bool CanSwapIn(std::span<const int64_t> group) const;

  [[nodiscard]] bool HasSequence(int64_t seq_id) const { return seqs_.contains(seq_id); }
  // REQUIRES: HasSequence(seq_id). The table is valid until the next mutation of this sequence.
  [[nodiscard]] const std::vector<int32_t>& BlockTable(int64_t seq_id) const;
  // REQUIRES: HasSequence(seq_id).
  [[nodiscard]] int64_t NumTokens(int64_t seq_id) const;
  // REQUIRES: HasSequence(seq_id). True when the table holds swap block ids.
  [[nodiscard]] bool IsSwapped(int64_t seq_id) const;
  [[nodiscard]] int32_t block_size() const { return options_.block_size; }
  [[nodiscard]] Stats GetStats() const;
  // Token slots holding KV in device blocks that sequences reference, each block counted once
  // however many tables share it. O(total table length); for statistics, not the hot path.
  [[nodiscard]] int64_t LiveDeviceTokenSlots() const;

  // ---- Mutations ----

  // Creates the block table of a new sequence for its prompt. With prefix caching, the longest
  // chain of cached full blocks matching the prompt is shared (never the block holding the last
  // prompt token, which must be computed). Returns the number of leading prompt tokens whose KV
  // is already cached (a multiple of block_size, < prompt size). The new blocks join the prefix
  // cache only once MarkComputed() says their KV exists.
  // `reuse_cached_prefix` false skips the lookup (0 is returned): a request whose every prompt
  // position must be computed (prompt logprobs); its blocks still join the cache once computed.
  // `cache_namespace`: blocks are shared only between sequences of the same namespace (their
  // KV depends on more than the tokens: a LoRA adapter's differs from the base model's); 0 is
  // the base model's. Forks inherit it.
  // AlreadyExists / InvalidArgument (empty prompt) / ResourceExhausted (device pool short).
  absl::StatusOr<int64_t> Allocate(int64_t seq_id, std::span<const int32_t> prompt,
                                   bool reuse_cached_prefix = true, uint64_t cache_namespace = 0);
  // Reserves the slot for one more token of a device-resident sequence. Takes a new block when
  // the last one is full; copies the last block first when it is shared, appending that
  // kDeviceToDevice copy to `copies`. NotFound / FailedPrecondition (swapped) /
  // ResourceExhausted (unchanged on error).
  absl::Status AppendSlot(int64_t seq_id, int32_t token, std::vector<KvCopy>* copies);
  // Gives back the slots of the sequence's tokens from `num_tokens` on (speculated tokens the
  // model rejected): blocks left holding none of its tokens are released. NotFound /
  // FailedPrecondition (swapped, or the cut reaches into a block the prefix cache registered) /
  // InvalidArgument (num_tokens outside [1, NumTokens]). Unchanged on error.
  absl::Status Truncate(int64_t seq_id, int64_t num_tokens);
  // Tells the manager that the first `num_computed` tokens of the sequence have their KV in the
  // pool: full blocks among them join the prefix cache (unless the same content is already
  // cached). NotFound when unknown; a swapped sequence is ignored.
  absl::Status MarkComputed(int64_t seq_id, int64_t num_computed);
  // The child shares all of the parent's blocks. NotFound / AlreadyExists / FailedPrecondition.
  absl::Status Fork(int64_t parent_id, int64_t child_id);
  // Releases the sequence's blocks (either pool). Cached device blocks stay reusable until an
  // allocation needs them, least recently released first. NotFound when unknown.
  absl::Status Free(int64_t seq_id);
  // Moves the group's blocks device->swap; a block shared within the group is copied once.
  // Returns the kDeviceToSwap copies. NotFound / FailedPrecondition (already swapped) /
  // ResourceExhausted (swap pool short).
  absl::StatusOr<std::vector<KvCopy>> SwapOut(std::span<const int64_t> group);
  // The reverse of SwapOut; returns the kSwapToDevice copies. Errors as SwapOut (device pool).
  absl::StatusOr<std::vector<KvCopy>> SwapIn(std::span<const int64_t> group);

  // The prefix cache's block hashes (common/prefix_cache/block_hash.h) as a Bloom filter, for the
  // router's cache-aware routing; null when prefix caching is off. Its version() and Snapshot()
  // may be called from any thread while the manager runs (everything else here may not).
  [[nodiscard]] const CountingPrefixFilter* prefix_filter() const { return filter_.get(); }

  // ---- Test hooks ----
  [[nodiscard]] int32_t TEST_DeviceRefCount(int32_t block) const {
    return device_.ref_count(block);
  }
  [[nodiscard]] int32_t TEST_SwapRefCount(int32_t block) const { return swap_.ref_count(block); }
  [[nodiscard]] int32_t TEST_NumUnreferencedDeviceBlocks() const { return device_.num_free(); }
  // Device blocks the prefix cache holds a reference on.
  [[nodiscard]] std::vector<int32_t> TEST_CachedBlocks() const;

 private:
  struct Sequence {
    std::vector<int32_t> blocks;   // physical ids in the pool given by `swapped`
    std::vector<int32_t> tokens;   // all tokens so far; size() is the token count
    std::vector<uint64_t> hashes;  // chained hash of each full block, in order
    uint64_t root_hash = 0;        // the first block's parent: its cache namespace's root
    bool swapped = false;
  };
  struct CacheEntry {
    int32_t block = -1;
    uint64_t parent_hash = 0;
    std::vector<int32_t> tokens;  // verified on lookup so a hash collision is a miss
  };

  explicit BlockManager(const Options& options);

  // The cached block for (hash, parent, tokens), or -1.
  int32_t LookupCached(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens) const;
  // Hashes block `block_index` (the next unhashed one) of the sequence and caches it.
  void RegisterFullBlock(Sequence& seq, int32_t block_index);
  // Adds the block to the prefix cache (the cache takes a reference) unless the hash or the
  // block is already there.
  void CacheBlock(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens,
                  int32_t block);
  // Takes a device block, evicting the least recently released cached block if none is free.
  // REQUIRES: NumFreeDeviceBlocks() > 0.
  int32_t AllocateDeviceBlock();
  // Adds a table reference to a device block, taking it off the eviction list.
  void AddDeviceRef(int32_t block);
  // Drops a table reference; a cached block left with only the cache's reference is evictable.
  void ReleaseDeviceRef(int32_t block);
  absl::Status CheckGroup(std::span<const int64_t> group, bool want_swapped) const;
  // Distinct blocks of the group's tables, in first-seen order.
  std::vector<int32_t> DistinctBlocks(std::span<const int64_t> group) const;
  int32_t WatermarkBlocks() const;

  Options options_;
  BlockAllocator device_;
  BlockAllocator swap_;
  std::unordered_map<int64_t, Sequence> seqs_;

  // Prefix cache: hash -> entry, and block -> hash for blocks it holds a reference on.
  std::unordered_map<uint64_t, CacheEntry> cache_;
  std::unordered_map<int32_t, uint64_t> cached_block_hash_;
  // Cached blocks whose only reference is the cache's, least recently released first.
  std::list<int32_t> evictable_;
  std::unordered_map<int32_t, std::list<int32_t>::iterator> evictable_pos_;

  std::unique_ptr<CountingPrefixFilter> filter_;  // mirrors cache_'s keys

  int64_t hit_tokens_ = 0;
  int64_t queried_tokens_ = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_KV_BLOCK_MANAGER_H_
