// AdapterTable: the LoRA adapters an engine serves, and which of the backend's adapter slots
// (Backend::adapter_names, ForwardBatch::seq_adapter) holds each.
//
// An adapter is an id here. Those the backend was built with (--lora-modules) are fixed in their
// slots: the engine holds no copy of their weights. Those loaded while serving (Add) keep their
// weights host-side and move in and out of slots: the engine serves up to `capacity` adapters
// (vLLM's --max-cpu-loras) with fewer slots (--max-loras, what one batch can mix), putting an
// adapter in a slot when a step needs it (SlotToFill picks an empty slot, else the least
// recently used moving adapter's that the step does not need). Scheduler::lora_slots keeps the
// adapters one step needs within the slots free for them (moving_slots).
//
// A request names an adapter; Find() gives its id, and Acquire()/Release() count the requests
// holding it. Unloading an adapter (Retire) makes Find() miss at once, while requests already
// admitted keep it; it is forgotten (Drop: its slot, if any, to be emptied by the engine) when
// the last of them releases it. A new adapter under a retiring adapter's name gets another id:
// requests never see weights change under them.
//
// Prefix caching: an adapter's blocks are cached under its namespace. The first adapter a worker
// loads under a name uses PrefixCacheNamespace(name), the same in every worker (a router's
// cache-aware routing computes it too); a later adapter under the same name (re-loaded, perhaps
// with other weights) gets a namespace of its own, so it never reads its predecessor's KV.
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

class AdapterTable {
 public:
  // `slots`: the backend's adapter_names() at start ("" for an empty slot); the named ones are
  // fixed there. `capacity`: adapters served at once, at least slots.size() (raised to it).
  AdapterTable(const std::vector<std::string>& slots, int64_t capacity);

  // The id of the adapter served under `name` (not retiring). NotFound (listing those served)
  // otherwise.
  [[nodiscard]] absl::StatusOr<int32_t> Find(const std::string& name) const;
  // One more request uses adapter `id`. REQUIRES: id came from Find.
  void Acquire(int32_t id);
  // A request using `id` ended. True when it was retiring and this was its last user: the
  // caller calls Drop.
  [[nodiscard]] bool Release(int32_t id);

  // Serves `adapter` (named, weights kept here) from now on, in no slot yet. AlreadyExists when
  // one is served under its name; ResourceExhausted when `capacity` are (retiring ones count
  // until their last request ends) or no slot can take a moving adapter (every one holds a fixed
  // adapter, or broke).
  [[nodiscard]] absl::StatusOr<int32_t> Add(std::shared_ptr<const LoraAdapter> adapter);
  // Stops serving `id` (from Find). True when no request uses it: the caller calls Drop; else
  // the last Release says when.
  [[nodiscard]] bool Retire(int32_t id);
  // Forgets the retired, unused adapter `id`. Returns the slot it held, now empty here (-1 if
  // none): the caller empties it in the backend (or calls BreakSlot when that fails).
  [[nodiscard]] int32_t Drop(int32_t id);

  // Where `id` is: its slot, or -1 while it is in none.
  [[nodiscard]] int32_t slot(int32_t id) const { return entries_[id].slot; }
  // True for an adapter that moves between slots (Add), false for a fixed one.
  [[nodiscard]] bool moves(int32_t id) const { return entries_[id].weights != nullptr; }
  // A moving adapter's weights.
  [[nodiscard]] const std::shared_ptr<const LoraAdapter>& weights(int32_t id) const {
    return entries_[id].weights;
  }
  // Step `step` (increasing) uses `id`.
  void Touch(int32_t id, int64_t step) { entries_[id].last_used = step; }
  // A slot for an adapter that step `step` needs: an empty one if any, else the one whose moving
  // adapter was used least recently, not in `step`. -1 when there is none.
  [[nodiscard]] int32_t SlotToFill(int64_t step) const;
  // The adapter in `slot` leaves it (the caller empties it in the backend). False when the slot
  // was empty. REQUIRES: a moving adapter's slot, or an empty one.
  bool Vacate(int32_t slot);
  // Moving adapter `id` is now in the empty `slot` in the backend.
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

 private:
  static constexpr int32_t kEmpty = -1;
  static constexpr int32_t kBroken = -2;
  struct Entry {
    std::string name;                            // "" when the id is free
    std::shared_ptr<const LoraAdapter> weights;  // null for a fixed adapter
    int32_t slot = -1;
    int64_t users = 0;
    bool retiring = false;
    uint64_t cache_namespace = 0;
    int64_t last_used = -1;
  };
  // A free id for `name`, its namespace set. REQUIRES: one is free.
  int32_t NewEntry(const std::string& name);

  std::vector<Entry> entries_;  // by id; `capacity` of them
  std::vector<int32_t> slots_;  // the id in each slot, kEmpty or kBroken
  // Adapters installed under each name so far (each gets its own cache namespace after the
  // first). One entry per name ever loaded: bounded by the operator's loads, not by clients.
  absl::flat_hash_map<std::string, int64_t> installs_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_ADAPTER_TABLE_H_
