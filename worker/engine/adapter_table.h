// AdapterTable: the engine's view of the backend's LoRA adapter slots (Backend::adapter_names):
// which adapter each slot holds, how many requests use it, and whether it is being unloaded.
//
// A request names an adapter; Find() gives the slot of the one served under that name, and
// Acquire()/Release() count the requests holding it. Unloading an adapter (Retire) makes Find()
// miss at once, while requests already running keep their slot; the slot is empty again (and
// its memory freed by the engine) when the last of them releases it. A new adapter under a
// retiring adapter's name gets another slot: requests never see weights change under them.
//
// Prefix caching: a slot's blocks are cached under its namespace. The first adapter a worker
// loads under a name uses PrefixCacheNamespace(name), the same in every worker (a router's
// cache-aware routing computes it too); a later adapter under the same name (re-loaded, perhaps
// with other weights) gets a namespace of its own, so it never reads its predecessor's KV.
//
// Not thread-safe: the engine thread owns it.
#ifndef PAGELLM_WORKER_ENGINE_ADAPTER_TABLE_H_
#define PAGELLM_WORKER_ENGINE_ADAPTER_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace pagellm {

class AdapterTable {
 public:
  // `slots`: the backend's adapter_names() at start ("" for an empty slot).
  explicit AdapterTable(const std::vector<std::string>& slots);

  // The slot of the adapter served under `name` (not retiring). NotFound (listing those served)
  // otherwise.
  [[nodiscard]] absl::StatusOr<int32_t> Find(const std::string& name) const;
  // One more request uses `slot`. REQUIRES: slot came from Find.
  void Acquire(int32_t slot);
  // A request using `slot` ended. True when the slot was retiring and this was its last user:
  // the caller empties it in the backend and calls Free.
  [[nodiscard]] bool Release(int32_t slot);

  // An empty slot for a new adapter named `name`. AlreadyExists when one is served under that
  // name; ResourceExhausted when no slot is empty (every one holds an adapter, or one being
  // unloaded).
  [[nodiscard]] absl::StatusOr<int32_t> EmptySlotFor(const std::string& name) const;
  // The backend now holds adapter `name` in `slot` (from EmptySlotFor).
  void Install(int32_t slot, const std::string& name);
  // Stops serving the adapter in `slot` (from Find). True when no request uses it: the caller
  // empties it in the backend and calls Free; else the last Release says when.
  [[nodiscard]] bool Retire(int32_t slot);
  // `slot` is empty in the backend again.
  void Free(int32_t slot);

  // The prefix-cache namespace of `slot`'s adapter.
  [[nodiscard]] uint64_t cache_namespace(int32_t slot) const {
    return slots_[slot].cache_namespace;
  }
  // The names served (not retiring), in slot order.
  [[nodiscard]] std::vector<std::string> Served() const;
  [[nodiscard]] int64_t num_slots() const { return static_cast<int64_t>(slots_.size()); }

 private:
  struct Slot {
    std::string name;  // "" when empty
    int64_t users = 0;
    bool retiring = false;
    uint64_t cache_namespace = 0;
  };
  std::vector<Slot> slots_;
  // Adapters installed under each name so far (each gets its own cache namespace after the
  // first). One entry per name ever loaded: bounded by the operator's loads, not by clients.
  absl::flat_hash_map<std::string, int64_t> installs_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_ADAPTER_TABLE_H_
