// Design and invariants.
//
// Reference counts. A device block's count is the number of sequence tables that list it (a
// table listing it twice counts twice; that does not happen today) plus one if the prefix cache
// holds it. A swap block's count is the number of tables that list it. So a block is free exactly
// when no table and not the cache refers to it (BlockAllocator's own invariant).
//
// Prefix cache. Only full blocks are cached, keyed by a hash chained over (parent block's hash,
// the block's token ids); the entry keeps the parent hash and tokens so that a hash collision
// is a miss, not wrong KV. A full block is never written again (appends go to a new block), so a
// cached block's contents never change. A cached block whose count is 1 (only the cache) is
// "evictable": it sits in `evictable_` in the order it became evictable, and counts as free.
// The free list is used first; only when it is empty does an allocation evict the front of
// `evictable_` (drop it from the cache, release the cache's reference, take the block).
//
// Blocks are registered only when the caller says their KV has been computed (MarkComputed), so
// a prefix hit never points at a block whose KV is still to come (a chunked prefill in flight).
// A swapped-in sequence's full blocks re-join the cache when their content is not cached yet.
//
// Every mutation checks capacity before changing anything, so an error leaves state unchanged.
#include "worker/kv/block_manager.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/prefix_cache/block_hash.h"

namespace pagellm {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

absl::StatusOr<std::unique_ptr<BlockManager>> BlockManager::Create(const Options& options) {
  if (options.num_device_blocks <= 0 || options.num_swap_blocks < 0 || options.block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BlockManager needs num_device_blocks > 0, num_swap_blocks >= 0, block_size > 0; got ",
        options.num_device_blocks, ", ", options.num_swap_blocks, ", ", options.block_size));
  }
  if (!(options.watermark >= 0.0 && options.watermark < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("watermark must be in [0, 1), got ", options.watermark));
  }
  return std::unique_ptr<BlockManager>(new BlockManager(options));
}

BlockManager::BlockManager(const Options& options)
    : options_(options), device_(options.num_device_blocks), swap_(options.num_swap_blocks) {
  if (options.enable_prefix_caching) {
    filter_ = std::make_unique<CountingPrefixFilter>(options.num_device_blocks,
                                                     options.prefix_filter_version);
  }
}

// ---- Queries ----

int32_t BlockManager::WatermarkBlocks() const {
  return static_cast<int32_t>(options_.watermark * options_.num_device_blocks);
}

int32_t BlockManager::NumFreeDeviceBlocks() const {
  return device_.num_free() + static_cast<int32_t>(evictable_.size());
}

bool BlockManager::CanAllocate(int64_t num_prompt_tokens) const {
  if (num_prompt_tokens <= 0) return false;
  return CanAllocateBlocks(CeilDiv(num_prompt_tokens, options_.block_size));
}

bool BlockManager::CanAllocateBlocks(int64_t num_blocks) const {
  return NumFreeDeviceBlocks() - num_blocks >= WatermarkBlocks();
}

bool BlockManager::CanAppendSlots(std::span<const int64_t> seq_ids) const {
  int64_t needed = 0;
  for (int64_t id : seq_ids) {
    auto it = seqs_.find(id);
    if (it == seqs_.end() || it->second.swapped) return false;
    const Sequence& seq = it->second;
    if (seq.tokens.size() % options_.block_size == 0 || device_.ref_count(seq.blocks.back()) > 1) {
      ++needed;
    }
  }
  return needed <= NumFreeDeviceBlocks();
}

absl::Status BlockManager::CheckGroup(std::span<const int64_t> group, bool want_swapped) const {
  std::unordered_set<int64_t> seen;
  for (int64_t id : group) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return absl::NotFoundError(absl::StrCat("no sequence ", id));
    if (it->second.swapped != want_swapped) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sequence ", id, want_swapped ? " is not swapped out" : " is already swapped out"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", id, " listed twice"));
    }
  }
  return absl::OkStatus();
}

std::vector<int32_t> BlockManager::DistinctBlocks(std::span<const int64_t> group) const {
  std::vector<int32_t> out;
  std::unordered_set<int32_t> seen;
  for (int64_t id : group) {
    for (int32_t b : seqs_.at(id).blocks) {
      if (seen.insert(b).second) out.push_back(b);
    }
  }
  return out;
}

bool BlockManager::CanSwapOut(std::span<const int64_t> group) const {
  if (!CheckGroup(group, /*want_swapped=*/false).ok()) return false;
  return static_cast<int64_t>(DistinctBlocks(group).size()) <= swap_.num_free();
}

bool BlockManager::CanSwapIn(std::span<const int64_t> group) const {
  if (!CheckGroup(group, /*want_swapped=*/true).ok()) return false;
  return NumFreeDeviceBlocks() - static_cast<int64_t>(DistinctBlocks(group).size()) >=
         WatermarkBlocks();
}

const std::vector<int32_t>& BlockManager::BlockTable(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  PAGELLM_CHECK(it != seqs_.end(), "BlockTable of unknown sequence {}", seq_id);
  return it->second.blocks;
}

int64_t BlockManager::NumTokens(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  PAGELLM_CHECK(it != seqs_.end(), "NumTokens of unknown sequence {}", seq_id);
  return static_cast<int64_t>(it->second.tokens.size());
}

bool BlockManager::IsSwapped(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  PAGELLM_CHECK(it != seqs_.end(), "IsSwapped of unknown sequence {}", seq_id);
  return it->second.swapped;
}

BlockManager::Stats BlockManager::GetStats() const {
  Stats s;
  s.device_free = NumFreeDeviceBlocks();
  s.device_used = device_.num_blocks() - s.device_free;
  s.device_cached = static_cast<int32_t>(cached_block_hash_.size());
  s.device_cached_evictable = static_cast<int32_t>(evictable_.size());
  s.swap_free = swap_.num_free();
  s.swap_used = swap_.num_blocks() - s.swap_free;
  s.prefix_cache_hit_tokens = hit_tokens_;
  s.prefix_cache_queried_tokens = queried_tokens_;
  return s;
}

int64_t BlockManager::LiveDeviceTokenSlots() const {
  std::unordered_map<int32_t, int64_t> fill;
  const int64_t bs = options_.block_size;
  for (const auto& [id, seq] : seqs_) {
    if (seq.swapped) continue;
    const int64_t n = static_cast<int64_t>(seq.tokens.size());
    for (size_t i = 0; i < seq.blocks.size(); ++i) {
      const int64_t f = std::clamp<int64_t>(n - static_cast<int64_t>(i) * bs, 0, bs);
      int64_t& slot = fill[seq.blocks[i]];
      slot = std::max(slot, f);
    }
  }
  int64_t live = 0;
  for (const auto& [block, f] : fill) live += f;
  return live;
}

std::vector<int32_t> BlockManager::TEST_CachedBlocks() const {
  std::vector<int32_t> out;
  for (const auto& [block, hash] : cached_block_hash_) out.push_back(block);
  std::sort(out.begin(), out.end());
  return out;
}

// ---- Block helpers ----

int32_t BlockManager::LookupCached(uint64_t hash, uint64_t parent_hash,
                                   std::span<const int32_t> tokens) const {
  auto it = cache_.find(hash);
  if (it == cache_.end() || it->second.parent_hash != parent_hash ||
      !std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin(),
                  it->second.tokens.end())) {
    return -1;
  }
  return it->second.block;
}

void BlockManager::RegisterFullBlock(Sequence& seq, int32_t block_index) {
  PAGELLM_CHECK(static_cast<int32_t>(seq.hashes.size()) == block_index,
                "hash chain has {} entries, registering block {}", seq.hashes.size(), block_index);
  const int64_t bs = options_.block_size;
  const uint64_t parent = block_index == 0 ? seq.root_hash : seq.hashes.back();
  std::span<const int32_t> tokens(seq.tokens.data() + block_index * bs, bs);
  const uint64_t hash = HashPrefixBlock(parent, tokens);
  seq.hashes.push_back(hash);
  CacheBlock(hash, parent, tokens, seq.blocks[block_index]);
}

void BlockManager::CacheBlock(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens,
                              int32_t block) {
  // Same content already cached (or a collision): keep the older entry, this block stays private.
  if (cache_.contains(hash) || cached_block_hash_.contains(block)) return;
  device_.AddRef(block);  // the cache's reference
  cache_.emplace(
      hash, CacheEntry{block, parent_hash, std::vector<int32_t>(tokens.begin(), tokens.end())});
  cached_block_hash_.emplace(block, hash);
  if (filter_ != nullptr) filter_->Add(hash);
}

int32_t BlockManager::AllocateDeviceBlock() {
  if (device_.num_free() == 0) {
    PAGELLM_CHECK(!evictable_.empty(), "AllocateDeviceBlock with no free or evictable block");
    const int32_t victim = evictable_.front();
    evictable_.pop_front();
    evictable_pos_.erase(victim);
    auto it = cached_block_hash_.find(victim);
    PAGELLM_CHECK(it != cached_block_hash_.end(), "evictable block {} not in cache", victim);
    if (filter_ != nullptr) filter_->Remove(it->second);
    cache_.erase(it->second);
    cached_block_hash_.erase(it);
    PAGELLM_CHECK(device_.ref_count(victim) == 1, "evicting block {} with {} references", victim,
                  device_.ref_count(victim));
    device_.Release(victim);
  }
  absl::StatusOr<int32_t> block = device_.Allocate();
  PAGELLM_CHECK(block.ok(), "device allocation failed after eviction: {}",
                block.status().ToString());
  return *block;
}

void BlockManager::AddDeviceRef(int32_t block) {
  device_.AddRef(block);
  auto it = evictable_pos_.find(block);
  if (it != evictable_pos_.end()) {
    evictable_.erase(it->second);
    evictable_pos_.erase(it);
  }
}

void BlockManager::ReleaseDeviceRef(int32_t block) {
  device_.Release(block);
  if (device_.ref_count(block) == 1 && cached_block_hash_.contains(block)) {
    PAGELLM_CHECK(!evictable_pos_.contains(block), "block {} already evictable", block);
    evictable_pos_.emplace(block, evictable_.insert(evictable_.end(), block));
  }
}

// ---- Mutations ----

absl::StatusOr<int64_t> BlockManager::Allocate(int64_t seq_id, std::span<const int32_t> prompt,
                                               bool reuse_cached_prefix, uint64_t cache_namespace) {
  if (seqs_.contains(seq_id)) {
    return absl::AlreadyExistsError(absl::StrCat("sequence ", seq_id, " already allocated"));
  }
  if (prompt.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", seq_id, " has an empty prompt"));
  }
  const int64_t bs = options_.block_size;
  const int64_t n = static_cast<int64_t>(prompt.size());
  const int64_t num_blocks = CeilDiv(n, bs);

  // Look up the cached prefix without changing anything. The block holding the last prompt token
  // is never reused: that token's KV must be computed.
  const uint64_t root = PrefixCacheRoot(cache_namespace);
  std::vector<int32_t> hit_blocks;
  std::vector<uint64_t> hit_hashes;
  int64_t evictable_hits = 0;
  if (options_.enable_prefix_caching && reuse_cached_prefix) {
    const int64_t max_hits = (n - 1) / bs;
    uint64_t parent = root;
    for (int64_t i = 0; i < max_hits; ++i) {
      std::span<const int32_t> tokens = prompt.subspan(i * bs, bs);
      const uint64_t hash = HashPrefixBlock(parent, tokens);
      const int32_t block = LookupCached(hash, parent, tokens);
      if (block < 0) break;
      hit_blocks.push_back(block);
      hit_hashes.push_back(hash);
      if (evictable_pos_.contains(block)) ++evictable_hits;
      parent = hash;
    }
  }
  const int64_t num_hits = static_cast<int64_t>(hit_blocks.size());
  const int64_t available = NumFreeDeviceBlocks() - evictable_hits;
  if (num_blocks - num_hits > available) {
    return absl::ResourceExhaustedError(absl::StrCat("sequence ", seq_id, " needs ",
                                                     num_blocks - num_hits, " new KV blocks, ",
                                                     available, " free"));
  }

  Sequence seq;
  seq.tokens.assign(prompt.begin(), prompt.end());
  seq.blocks.reserve(num_blocks);
  for (int32_t b : hit_blocks) {  // take hits off the eviction list before anything evicts
    AddDeviceRef(b);
    seq.blocks.push_back(b);
  }
  for (int64_t i = num_hits; i < num_blocks; ++i) seq.blocks.push_back(AllocateDeviceBlock());
  seq.hashes = std::move(hit_hashes);
  seq.root_hash = root;
  seqs_.emplace(seq_id, std::move(seq));
  if (reuse_cached_prefix) queried_tokens_ += n;  // a skipped lookup is not a miss
  hit_tokens_ += num_hits * bs;
  return num_hits * bs;
}

absl::Status BlockManager::AppendSlot(int64_t seq_id, int32_t token, std::vector<KvCopy>* copies) {
  PAGELLM_CHECK(copies != nullptr, "AppendSlot needs a copy list (sequence {})", seq_id);
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return absl::NotFoundError(absl::StrCat("no sequence ", seq_id));
  Sequence& seq = it->second;
  if (seq.swapped) {
    return absl::FailedPreconditionError(absl::StrCat("sequence ", seq_id, " is swapped out"));
  }
  const int64_t bs = options_.block_size;
  const bool last_full = seq.tokens.size() % bs == 0;
  const bool last_shared = !last_full && device_.ref_count(seq.blocks.back()) > 1;
  if (last_full || last_shared) {
    if (NumFreeDeviceBlocks() == 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no free KV block to append to sequence ", seq_id));
    }
    const int32_t fresh = AllocateDeviceBlock();
    if (last_full) {
      seq.blocks.push_back(fresh);
    } else {
      const int32_t old = seq.blocks.back();
      PAGELLM_CHECK(!cached_block_hash_.contains(old), "partial block {} is in the prefix cache",
                    old);
      copies->push_back({KvCopy::Kind::kDeviceToDevice, old, fresh});
      ReleaseDeviceRef(old);
      seq.blocks.back() = fresh;
    }
  }
  seq.tokens.push_back(token);
  return absl::OkStatus();
}

absl::Status BlockManager::Truncate(int64_t seq_id, int64_t num_tokens) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return absl::NotFoundError(absl::StrCat("no sequence ", seq_id));
  Sequence& seq = it->second;
  if (seq.swapped) {
    return absl::FailedPreconditionError(absl::StrCat("sequence ", seq_id, " is swapped out"));
  }
  const auto have = static_cast<int64_t>(seq.tokens.size());
  if (num_tokens < 1 || num_tokens > have) {
    return absl::InvalidArgumentError(
        absl::StrCat("truncating sequence ", seq_id, " of ", have, " tokens to ", num_tokens));
  }
  const int64_t bs = options_.block_size;
  if (num_tokens < static_cast<int64_t>(seq.hashes.size()) * bs) {
    return absl::FailedPreconditionError(absl::StrCat(
        "truncating sequence ", seq_id, " to ", num_tokens, " tokens cuts into its cached blocks"));
  }
  const int64_t keep = CeilDiv(num_tokens, bs);
  while (static_cast<int64_t>(seq.blocks.size()) > keep) {
    ReleaseDeviceRef(seq.blocks.back());
    seq.blocks.pop_back();
  }
  seq.tokens.resize(num_tokens);
  return absl::OkStatus();
}

absl::Status BlockManager::MarkComputed(int64_t seq_id, int64_t num_computed) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return absl::NotFoundError(absl::StrCat("no sequence ", seq_id));
  Sequence& seq = it->second;
  if (!options_.enable_prefix_caching || seq.swapped) return absl::OkStatus();
  const int64_t full = std::min<int64_t>(num_computed, seq.tokens.size()) / options_.block_size;
  while (static_cast<int64_t>(seq.hashes.size()) < full) {
    RegisterFullBlock(seq, static_cast<int32_t>(seq.hashes.size()));
  }
  return absl::OkStatus();
}

absl::Status BlockManager::Fork(int64_t parent_id, int64_t child_id) {
  auto it = seqs_.find(parent_id);
  if (it == seqs_.end()) return absl::NotFoundError(absl::StrCat("no sequence ", parent_id));
  if (it->second.swapped) {
    return absl::FailedPreconditionError(absl::StrCat("sequence ", parent_id, " is swapped out"));
  }
  if (seqs_.contains(child_id)) {
    return absl::AlreadyExistsError(absl::StrCat("sequence ", child_id, " already allocated"));
  }
  Sequence child = it->second;
  for (int32_t b : child.blocks) AddDeviceRef(b);
  seqs_.emplace(child_id, std::move(child));
  return absl::OkStatus();
}

absl::Status BlockManager::Free(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return absl::NotFoundError(absl::StrCat("no sequence ", seq_id));
  const Sequence& seq = it->second;
  // Release from the tail so that a prompt's later blocks are evicted before its prefix.
  for (auto b = seq.blocks.rbegin(); b != seq.blocks.rend(); ++b) {
    if (seq.swapped) {
      swap_.Release(*b);
    } else {
      ReleaseDeviceRef(*b);
    }
  }
  seqs_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<KvCopy>> BlockManager::SwapOut(std::span<const int64_t> group) {
  if (absl::Status s = CheckGroup(group, /*want_swapped=*/false); !s.ok()) return s;
  const std::vector<int32_t> distinct = DistinctBlocks(group);
  if (static_cast<int64_t>(distinct.size()) > swap_.num_free()) {
    return absl::ResourceExhaustedError(absl::StrCat("swap-out needs ", distinct.size(),
                                                     " swap blocks, ", swap_.num_free(), " free"));
  }
  std::vector<KvCopy> copies;
  std::unordered_map<int32_t, int32_t> to_swap;
  for (int32_t d : distinct) {
    absl::StatusOr<int32_t> c = swap_.Allocate();
    PAGELLM_CHECK(c.ok(), "swap allocation failed after capacity check: {}", c.status().ToString());
    to_swap.emplace(d, *c);
    copies.push_back({KvCopy::Kind::kDeviceToSwap, d, *c});
  }
  for (int64_t id : group) {
    Sequence& seq = seqs_.at(id);
    for (int32_t& b : seq.blocks) {
      const int32_t c = to_swap.at(b);
      swap_.AddRef(c);
      ReleaseDeviceRef(b);
      b = c;
    }
    seq.swapped = true;
  }
  for (const KvCopy& copy : copies) swap_.Release(copy.dst);  // drop the allocation's ref
  return copies;
}

absl::StatusOr<std::vector<KvCopy>> BlockManager::SwapIn(std::span<const int64_t> group) {
  if (absl::Status s = CheckGroup(group, /*want_swapped=*/true); !s.ok()) return s;
  const std::vector<int32_t> distinct = DistinctBlocks(group);
  if (static_cast<int64_t>(distinct.size()) > NumFreeDeviceBlocks()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "swap-in needs ", distinct.size(), " device blocks, ", NumFreeDeviceBlocks(), " free"));
  }
  std::vector<KvCopy> copies;
  std::unordered_map<int32_t, int32_t> to_device;
  for (int32_t c : distinct) {
    const int32_t d = AllocateDeviceBlock();
    to_device.emplace(c, d);
    copies.push_back({KvCopy::Kind::kSwapToDevice, c, d});
  }
  for (int64_t id : group) {
    Sequence& seq = seqs_.at(id);
    for (int32_t& b : seq.blocks) {
      const int32_t d = to_device.at(b);
      AddDeviceRef(d);
      swap_.Release(b);
      b = d;
    }
    seq.swapped = false;
  }
  for (const KvCopy& copy : copies) device_.Release(copy.dst);  // drop the allocation's ref
  // The blocks' KV is back: let the prefix cache have content it lost while they were out.
  if (options_.enable_prefix_caching) {
    const int64_t bs = options_.block_size;
    for (int64_t id : group) {
      const Sequence& seq = seqs_.at(id);
      for (size_t i = 0; i < seq.hashes.size(); ++i) {
        const uint64_t parent = i == 0 ? seq.root_hash : seq.hashes[i - 1];
        CacheBlock(seq.hashes[i], parent, std::span<const int32_t>(seq.tokens.data() + i * bs, bs),
                   seq.blocks[i]);
      }
    }
  }
  return copies;
}

}  // namespace pagellm
