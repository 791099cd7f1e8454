#include "worker/engine/adapter_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/prefix_cache/block_hash.h"
#include "worker/model/lora_adapter.h"

namespace pagellm {

AdapterTable::AdapterTable(const std::vector<std::string>& slots, int64_t capacity)
    : entries_(std::max<size_t>(slots.size(), static_cast<size_t>(std::max<int64_t>(capacity, 0)))),
      slots_(slots.size(), kEmpty) {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].empty()) continue;
    const int32_t id = NewEntry(slots[i]);
    entries_[id].slot = static_cast<int32_t>(i);
    slots_[i] = id;
  }
}

int32_t AdapterTable::NewEntry(const std::string& name) {
  auto it =
      std::find_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.name.empty(); });
  PAGELLM_CHECK(it != entries_.end() && !name.empty(), "no free adapter id for a new adapter");
  *it = Entry{};
  it->name = name;
  const int64_t earlier = installs_[name]++;
  it->cache_namespace = earlier == 0 ? PrefixCacheNamespace(name)
                                     : PrefixCacheNamespace(absl::StrCat(name, "\n", earlier));
  return static_cast<int32_t>(it - entries_.begin());
}

absl::StatusOr<int32_t> AdapterTable::Find(const std::string& name) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (!entries_[i].retiring && entries_[i].name == name && !name.empty()) {
      return static_cast<int32_t>(i);
    }
  }
  const std::vector<std::string> served = Served();
  return absl::NotFoundError(absl::StrCat(
      "LoRA adapter `", name, "` is not served here (",
      served.empty() ? "none is: see --lora-modules" : absl::StrJoin(served, ", "), ")"));
}

void AdapterTable::Acquire(int32_t id) {
  PAGELLM_CHECK(!entries_[id].name.empty() && !entries_[id].retiring, "acquiring LoRA adapter {}",
                id);
  ++entries_[id].users;
}

bool AdapterTable::Release(int32_t id) {
  Entry& e = entries_[id];
  PAGELLM_CHECK(e.users > 0, "releasing LoRA adapter {} that no request holds", id);
  return --e.users == 0 && e.retiring;
}

absl::StatusOr<int32_t> AdapterTable::Add(std::shared_ptr<const LoraAdapter> adapter) {
  PAGELLM_CHECK(adapter != nullptr && !adapter->name.empty(), "adding an unnamed LoRA adapter");
  if (Find(adapter->name).ok()) {
    return absl::AlreadyExistsError(
        absl::StrCat("LoRA adapter `", adapter->name, "` is already served"));
  }
  int64_t used = 0;
  int64_t retiring = 0;
  for (const Entry& e : entries_) {
    used += e.name.empty() ? 0 : 1;
    retiring += e.retiring ? 1 : 0;
  }
  if (used == static_cast<int64_t>(entries_.size())) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this worker serves ", entries_.size(), " LoRA adapters already (--max-cpu-loras; ",
        retiring, " of them being unloaded once their requests end)"));
  }
  if (moving_slots() == 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "every one of the ", slots_.size(),
        " LoRA adapter slots (--max-loras) holds a --lora-modules adapter: unload one first"));
  }
  const int32_t id = NewEntry(adapter->name);
  entries_[id].weights = std::move(adapter);
  return id;
}

bool AdapterTable::Retire(int32_t id) {
  Entry& e = entries_[id];
  PAGELLM_CHECK(!e.name.empty() && !e.retiring, "retiring LoRA adapter {}", id);
  e.retiring = true;
  return e.users == 0;
}

int32_t AdapterTable::Drop(int32_t id) {
  Entry& e = entries_[id];
  PAGELLM_CHECK(e.retiring && e.users == 0, "dropping LoRA adapter {}", id);
  const int32_t slot = e.slot;
  if (slot >= 0) slots_[slot] = kEmpty;
  e = Entry{};
  return slot;
}

int32_t AdapterTable::SlotToFill(int64_t step) const {
  int32_t best = -1;
  int64_t best_used = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const int32_t id = slots_[i];
    if (id == kEmpty) return static_cast<int32_t>(i);
    if (id == kBroken || !moves(id) || entries_[id].last_used >= step) continue;
    if (best < 0 || entries_[id].last_used < best_used) {
      best = static_cast<int32_t>(i);
      best_used = entries_[id].last_used;
    }
  }
  return best;
}

bool AdapterTable::Vacate(int32_t slot) {
  const int32_t id = slots_[slot];
  if (id == kEmpty) return false;
  PAGELLM_CHECK(id >= 0 && moves(id), "vacating LoRA slot {}", slot);
  entries_[id].slot = -1;
  slots_[slot] = kEmpty;
  return true;
}

void AdapterTable::Place(int32_t id, int32_t slot) {
  PAGELLM_CHECK(slots_[slot] == kEmpty && moves(id) && entries_[id].slot < 0,
                "placing LoRA adapter {} in slot {}", id, slot);
  slots_[slot] = id;
  entries_[id].slot = slot;
}

void AdapterTable::BreakSlot(int32_t slot) {
  const int32_t id = slots_[slot];
  if (id >= 0) entries_[id].slot = -1;
  slots_[slot] = kBroken;
}

int64_t AdapterTable::moving_slots() const {
  return std::count_if(slots_.begin(), slots_.end(),
                       [this](int32_t id) { return id == kEmpty || (id >= 0 && moves(id)); });
}

std::vector<std::string> AdapterTable::Served() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) {
    if (!e.name.empty() && !e.retiring) out.push_back(e.name);
  }
  return out;
}

}  // namespace pagellm
