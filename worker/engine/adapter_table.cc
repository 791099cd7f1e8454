#include "worker/engine/adapter_table.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/prefix_cache/block_hash.h"

namespace pagellm {

AdapterTable::AdapterTable(const std::vector<std::string>& slots) : slots_(slots.size()) {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].empty()) Install(static_cast<int32_t>(i), slots[i]);
  }
}

absl::StatusOr<int32_t> AdapterTable::Find(const std::string& name) const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].retiring && slots_[i].name == name) return static_cast<int32_t>(i);
  }
  const std::vector<std::string> served = Served();
  return absl::NotFoundError(absl::StrCat(
      "LoRA adapter `", name, "` is not served here (",
      served.empty() ? "none is: see --lora-modules" : absl::StrJoin(served, ", "), ")"));
}

void AdapterTable::Acquire(int32_t slot) {
  PAGELLM_CHECK(!slots_[slot].name.empty() && !slots_[slot].retiring, "acquiring LoRA slot {}",
                slot);
  ++slots_[slot].users;
}

bool AdapterTable::Release(int32_t slot) {
  Slot& s = slots_[slot];
  PAGELLM_CHECK(s.users > 0, "releasing LoRA slot {} that no request holds", slot);
  return --s.users == 0 && s.retiring;
}

absl::StatusOr<int32_t> AdapterTable::EmptySlotFor(const std::string& name) const {
  if (Find(name).ok()) {
    return absl::AlreadyExistsError(absl::StrCat("LoRA adapter `", name, "` is already served"));
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].name.empty()) return static_cast<int32_t>(i);
  }
  int64_t retiring = 0;
  for (const Slot& s : slots_) retiring += s.retiring ? 1 : 0;
  return absl::ResourceExhaustedError(
      absl::StrCat("all ", slots_.size(), " LoRA adapter slots (--max-loras) are in use (",
                   retiring, " by adapters being unloaded once their requests end)"));
}

void AdapterTable::Install(int32_t slot, const std::string& name) {
  Slot& s = slots_[slot];
  PAGELLM_CHECK(s.name.empty() && !name.empty(), "installing into LoRA slot {}", slot);
  s = Slot{};
  s.name = name;
  const int64_t earlier = installs_[name]++;
  s.cache_namespace = earlier == 0 ? PrefixCacheNamespace(name)
                                   : PrefixCacheNamespace(absl::StrCat(name, "\n", earlier));
}

bool AdapterTable::Retire(int32_t slot) {
  Slot& s = slots_[slot];
  PAGELLM_CHECK(!s.name.empty() && !s.retiring, "retiring LoRA slot {}", slot);
  s.retiring = true;
  return s.users == 0;
}

void AdapterTable::Free(int32_t slot) {
  PAGELLM_CHECK(slots_[slot].retiring && slots_[slot].users == 0, "freeing LoRA slot {}", slot);
  slots_[slot] = Slot{};
}

std::vector<std::string> AdapterTable::Served() const {
  std::vector<std::string> out;
  for (const Slot& s : slots_) {
    if (!s.name.empty() && !s.retiring) out.push_back(s.name);
  }
  return out;
}

}  // namespace pagellm
