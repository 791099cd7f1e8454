#include "worker/engine/adapter_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/prefix_cache/block_hash.h"
#include "worker/model/lora_adapter.h"

namespace pagellm {
namespace {

// Names listed in a NotFound message at most.
constexpr size_t kNamesListed = 16;

}  // namespace

AdapterTable::AdapterTable(const std::vector<std::string>& slots, int64_t capacity,
                           int64_t max_adapters)
    : capacity_(std::max<int64_t>(static_cast<int64_t>(slots.size()), capacity)),
      max_adapters_(std::max(capacity_, max_adapters)),
      slots_(slots.size(), kEmpty) {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].empty()) continue;
    const int32_t id = NewEntry(slots[i]);
    entries_[id].fixed = true;
    entries_[id].slot = static_cast<int32_t>(i);
    slots_[i] = id;
    ++held_;
  }
}

uint64_t AdapterTable::NextNamespace(const std::string& name) {
  const int64_t earlier = installs_[name]++;
  return earlier == 0 ? PrefixCacheNamespace(name)
                      : PrefixCacheNamespace(absl::StrCat(name, "\n", earlier));
}

int32_t AdapterTable::NewEntry(const std::string& name) {
  PAGELLM_CHECK(live_ < max_adapters_ && !name.empty(), "no free adapter id for a new adapter");
  int32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<int32_t>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[id];
  e = Entry{};
  e.name = name;
  e.cache_namespace = NextNamespace(name);
  served_[name] = id;
  ++live_;
  return id;
}

absl::StatusOr<int32_t> AdapterTable::Find(const std::string& name) const {
  if (auto it = served_.find(name); it != served_.end()) return it->second;
  std::vector<std::string> served = Served();
  const size_t total = served.size();
  if (total > kNamesListed) served.resize(kNamesListed);
  return absl::NotFoundError(absl::StrCat(
      "LoRA adapter `", name, "` is not served here (",
      served.empty() ? "none is: see --lora-modules" : absl::StrJoin(served, ", "),
      total > kNamesListed ? absl::StrCat(", and ", total - kNamesListed, " more") : "", ")"));
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
  if (served_.contains(adapter->name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("LoRA adapter `", adapter->name, "` is already served"));
  }
  if (live_ >= max_adapters_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this worker serves ", live_, " LoRA adapters already (at most ",
                     max_adapters_, "; ", live_ - static_cast<int64_t>(served_.size()),
                     " of them being unloaded once their requests end): unload one first"));
  }
  if (full()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this worker holds ", held_, " LoRA adapters in host memory already (--max-cpu-loras; ",
        live_ - static_cast<int64_t>(served_.size()),
        " of them being unloaded once their requests end)"));
  }
  if (moving_slots() == 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "every one of the ", slots_.size(),
        " LoRA adapter slots (--max-loras) holds a --lora-modules adapter: unload one first"));
  }
  const int32_t id = NewEntry(adapter->name);
  Entry& e = entries_[id];
  e.path = adapter->path;
  e.files = adapter->files;
  e.weights = std::move(adapter);
  ++held_;
  return id;
}

bool AdapterTable::Retire(int32_t id) {
  Entry& e = entries_[id];
  PAGELLM_CHECK(!e.name.empty() && !e.retiring, "retiring LoRA adapter {}", id);
  e.retiring = true;
  served_.erase(e.name);
  return e.users == 0;
}

int32_t AdapterTable::Drop(int32_t id) {
  Entry& e = entries_[id];
  PAGELLM_CHECK(e.retiring && e.users == 0, "dropping LoRA adapter {}", id);
  const int32_t slot = e.slot;
  if (slot >= 0) slots_[slot] = kEmpty;
  if (e.fixed || e.weights != nullptr || e.read != 0) --held_;
  e = Entry{};
  free_ids_.push_back(id);
  --live_;
  return slot;
}

int32_t AdapterTable::EvictionCandidate() const {
  int32_t best = -1;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (e.name.empty() || e.fixed || e.weights == nullptr || e.users > 0 || e.read != 0) continue;
    if (best < 0 || e.last_used < entries_[best].last_used) best = static_cast<int32_t>(i);
  }
  return best;
}

int32_t AdapterTable::Evict(int32_t id) {
  Entry& e = entries_[id];
  PAGELLM_CHECK(!e.fixed && e.weights != nullptr && e.users == 0 && e.read == 0,
                "evicting LoRA adapter {}", id);
  e.weights.reset();
  --held_;
  const int32_t slot = e.slot;
  if (slot >= 0) {
    slots_[slot] = kEmpty;
    e.slot = -1;
  }
  return slot;
}

uint64_t AdapterTable::BeginRead(int32_t id) {
  PAGELLM_CHECK(NeedsRead(id) && !full(), "reading LoRA adapter {} again", id);
  entries_[id].read = next_ticket_++;
  ++held_;
  return entries_[id].read;
}

bool AdapterTable::EndRead(int32_t id, uint64_t ticket, std::shared_ptr<const LoraAdapter> weights,
                           bool* renamespaced) {
  *renamespaced = false;
  if (id < 0 || static_cast<size_t>(id) >= entries_.size()) return false;
  Entry& e = entries_[id];
  if (ticket == 0 || e.read != ticket) return false;
  e.read = 0;
  if (weights == nullptr) {
    --held_;
    return true;
  }
  if (weights->files != e.files) {
    e.files = weights->files;
    e.cache_namespace = NextNamespace(e.name);
    *renamespaced = true;
  }
  e.weights = std::move(weights);
  return true;
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
  PAGELLM_CHECK(slots_[slot] == kEmpty && moves(id) && held(id) && entries_[id].slot < 0,
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
