// AdapterTable: the LoRA adapters an engine serves, which of them it holds in host memory, and
// which of the backend's adapter slots (Backend::adapter_names, ForwardBatch::seq_adapter) holds
// each.
//
// An adapter is an id here. Those the backend was built with (--lora-modules) are fixed in their
// slots: the engine holds no copy of their weights. Those loaded while serving (Add) move in and
// out of slots, and in and out of host memory, as vLLM's LoRA caches do:
//   - Served: up to `max_adapters` (kMaxServedLoraAdapters) names, each with the directory it
//     was read from.
//   - Held in host memory: up to `capacity` adapters (vLLM's --max-cpu-loras; the fixed ones
//     count). When another must come in, the least recently used one that no request holds lets
//     go of its weights (EvictionCandidate, Evict); a request for it later has them read again
//     from its directory (BeginRead, EndRead), off the engine thread.
//   - In a slot: fewer still (--max-loras, what one batch can mix). A step's adapter goes into
//     an empty slot, else the least recently used moving adapter's that the step does not need
//     (SlotToFill). Scheduler::lora_slots keeps one step's adapters within the slots free for
//     them (moving_slots).
//
// A request names an adapter; Find() gives its id, and Acquire()/Release() count the requests
// holding it: a held adapter with requests is never evicted. Unloading an adapter (Retire) makes
// Find() miss at once, while requests already admitted keep it; it is forgotten (Drop: its slot,
// if any, to be emptied by the engine) when the last of them releases it. A new adapter under a
// retiring adapter's name gets another id: requests never see weights change under them.
//
// Prefix caching: an adapter's blocks are cached under its namespace. The first adapter a worker
// loads under a name uses PrefixCacheNamespace(name), the same in every worker (a router's
// cache-aware routing computes it too); a later adapter under the same name (re-loaded, perhaps
// with other weights) gets a namespace of its own, so it never reads its predecessor's KV, and
// so does an adapter read again whose files changed since it was first read (Renamespace).
//
// Not thread-safe: the engine thread owns it.
#ifndef PAGELLM_WORKER_ENGINE_ADAPTER_TABLE_H_
#define PAGELLM_WORKER_ENGINE_ADAPTER_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace pagellm {

struct LoraAdapter;  // worker/model/lora_adapter.h

// Adapters one worker serves at most (loaded and not yet forgotten): what /v1/models and the
// load polls list. Each costs a name and a path here; only `capacity` hold weights.
inline constexpr int64_t kMaxServedLoraAdapters = 4096;

class AdapterTable {
 public:
  // `slots`: the backend's adapter_names() at start ("" for an empty slot); the named ones are
  // fixed there. `capacity`: adapters held in host memory (the fixed ones included), at least
  // slots.size() (raised to it). `max_adapters`: adapters served (raised to `capacity`).
  AdapterTable(const std::vector<std::string>& slots, int64_t capacity,
               int64_t max_adapters = kMaxServedLoraAdapters);

  // The id of the adapter served under `name` (not retiring). NotFound (listing some of those
  // served) otherwise.
  [[nodiscard]] absl::StatusOr<int32_t> Find(const std::string& name) const;
  // One more request uses adapter `id`. REQUIRES: id came from Find.
  void Acquire(int32_t id);
  // A request using `id` ended. True when it was retiring and this was its last user: the
  // caller calls Drop.
  [[nodiscard]] bool Release(int32_t id);

  // Serves `adapter` (named, weights held here) from now on, in no slot yet. AlreadyExists when
  // one is served under its name; ResourceExhausted when `max_adapters` are (retiring ones count
  // until their last request ends), when `capacity` are held (the caller evicts one first: see
  // full()), or when no slot can take a moving adapter (every one holds a fixed adapter, or
  // broke).
  [[nodiscard]] absl::StatusOr<int32_t> Add(std::shared_ptr<const LoraAdapter> adapter);
  // Stops serving `id` (from Find). True when no request uses it: the caller calls Drop; else
  // the last Release says when.
  [[nodiscard]] bool Retire(int32_t id);
  // Forgets the retired, unused adapter `id`. Returns the slot it held, now empty here (-1 if
  // none): the caller empties it in the backend (or calls BreakSlot when that fails).
  [[nodiscard]] int32_t Drop(int32_t id);

  // Host memory.
  // `capacity` adapters are held (or being read): another needs an eviction first.
  [[nodiscard]] bool full() const { return held_ >= capacity_; }
  // True while `id`'s weights are here (a fixed adapter: always).
  [[nodiscard]] bool held(int32_t id) const {
    return entries_[id].fixed || entries_[id].weights != nullptr;
  }
  // The moving adapter to let go of when another must come in: held, no request holding it, no
  // read pending, used least recently (Touch; the lowest id of equals). -1 when there is none.
  [[nodiscard]] int32_t EvictionCandidate() const;
  // `id` (from EvictionCandidate) lets go of its weights and leaves its slot. Returns that slot
  // (-1 if none): the caller empties it in the backend.
  [[nodiscard]] int32_t Evict(int32_t id);
  // True for a moving adapter whose weights are not here and not being read.
  [[nodiscard]] bool NeedsRead(int32_t id) const {
    return !entries_[id].fixed && entries_[id].weights == nullptr && entries_[id].read == 0;
  }
  // A read of `id`'s directory (path()) begins; it counts as held from now on. Returns the
  // ticket its result must bring back. REQUIRES: NeedsRead(id) and !full().
  [[nodiscard]] uint64_t BeginRead(int32_t id);
  // The read `ticket` of `id` ended with `weights` (null: it failed). False, and nothing
  // changes, when the ticket is not id's pending read (the adapter was dropped meanwhile). With
  // weights, `id` is held again: if its files changed since it was first read, it moves to a
  // namespace of its own (cache_namespace) and `renamespaced` is set.
  [[nodiscard]] bool EndRead(int32_t id, uint64_t ticket,
                             std::shared_ptr<const LoraAdapter> weights, bool* renamespaced);

  // Where `id` is: its slot, or -1 while it is in none.
  [[nodiscard]] int32_t slot(int32_t id) const { return entries_[id].slot; }
  // True for an adapter that moves between slots (Add), false for a fixed one.
  [[nodiscard]] bool moves(int32_t id) const { return !entries_[id].fixed; }
  // A held moving adapter's weights (null while not held).
  [[nodiscard]] const std::shared_ptr<const LoraAdapter>& weights(int32_t id) const {
    return entries_[id].weights;
  }
  [[nodiscard]] const std::string& name(int32_t id) const { return entries_[id].name; }
  // Requests holding `id` (0 for a free id).
  [[nodiscard]] int64_t users(int32_t id) const { return entries_[id].users; }
  // The directory a moving adapter was read from.
  [[nodiscard]] const std::string& path(int32_t id) const { return entries_[id].path; }
  // Step `step` (increasing) uses `id`.
  void Touch(int32_t id, int64_t step) { entries_[id].last_used = step; }
  // A slot for an adapter that step `step` needs: an empty one if any, else the one whose moving
  // adapter was used least recently, not in `step`. -1 when there is none.
  [[nodiscard]] int32_t SlotToFill(int64_t step) const;
  // The adapter in `slot` leaves it (the caller empties it in the backend). False when the slot
  // was empty. REQUIRES: a moving adapter's slot, or an empty one.
  bool Vacate(int32_t slot);
  // Held moving adapter `id` is now in the empty `slot` in the backend.
  void Place(int32_t id, int32_t slot);
  // `slot` cannot be emptied in the backend: it is never used again.
  void BreakSlot(int32_t slot);
  // Slots that moving adapters can use: neither holding a fixed adapter nor broken.
  [[nodiscard]] int64_t moving_slots() const;

  // The prefix-cache namespace of adapter `id`.
  [[nodiscard]] uint64_t cache_namespace(int32_t id) const { return entries_[id].cache_namespace; }
  // The names served (not retiring), by id (the fixed adapters first, in slot order).
  [[nodiscard]] std::vector<std::string> Served() const;
  [[nodiscard]] int64_t num_slots() const { return static_cast<int64_t>(slots_.size()); }
  // Adapters held in host memory (or being read), fixed ones included.
  [[nodiscard]] int64_t num_held() const { return held_; }

 private:
  static constexpr int32_t kEmpty = -1;
  static constexpr int32_t kBroken = -2;
  struct Entry {
    std::string name;  // "" when the id is free
    bool fixed = false;
    std::string path;                            // a moving adapter's directory
    std::string files;                           // LoraAdapter::files of its first read
    std::shared_ptr<const LoraAdapter> weights;  // a moving adapter's, while held
    uint64_t read = 0;                           // the pending read's ticket; 0: none
    int32_t slot = -1;
    int64_t users = 0;
    bool retiring = false;
    uint64_t cache_namespace = 0;
    int64_t last_used = -1;
  };
  // A free id for `name`, its namespace set. REQUIRES: fewer than max_adapters_ served.
  int32_t NewEntry(const std::string& name);
  // The next prefix-cache namespace for `name` (see the header comment).
  uint64_t NextNamespace(const std::string& name);

  int64_t capacity_ = 0;
  int64_t max_adapters_ = 0;
  std::vector<Entry> entries_;  // by id; grows to at most max_adapters_
  std::vector<int32_t> free_ids_;
  absl::flat_hash_map<std::string, int32_t> served_;  // name -> id, not retiring
  int64_t live_ = 0;                                  // entries in use (retiring included)
  int64_t held_ = 0;                                  // fixed + held or being read
  uint64_t next_ticket_ = 1;
  std::vector<int32_t> slots_;  // the id in each slot, kEmpty or kBroken
  // Adapters installed under each name so far (each gets its own cache namespace after the
  // first). One entry per name ever loaded: bounded by the operator's loads and the names in
  // the adapters' directory, not by clients.
  absl::flat_hash_map<std::string, int64_t> installs_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_ADAPTER_TABLE_H_
