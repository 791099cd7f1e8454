#include "worker/backend/adapter_slots.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/model/lora_adapter.h"

namespace pagellm {

AdapterSlots::AdapterSlots(std::vector<std::string> loaded, int64_t slots)
    : names_(std::move(loaded)) {
  names_.resize(std::max<size_t>(names_.size(), std::max<int64_t>(slots, 0)));
}

AdapterSlots::AdapterSlots(const std::vector<std::shared_ptr<const LoraAdapter>>& loaded,
                           int64_t slots)
    : AdapterSlots(std::vector<std::string>(), slots) {
  names_.resize(std::max(names_.size(), loaded.size()));
  for (size_t i = 0; i < loaded.size(); ++i) names_[i] = loaded[i]->name;
}

absl::Status AdapterSlots::Check(int32_t slot, const LoraAdapter* adapter) const {
  if (slot < 0 || slot >= static_cast<int64_t>(names_.size()) ||
      names_[slot].empty() != (adapter != nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("LoRA slot ", slot, " of ", names_.size(),
                                                   " is not ",
                                                   adapter != nullptr ? "empty" : "in use"));
  }
  if (adapter != nullptr && adapter->name.empty()) {
    return absl::InvalidArgumentError("a LoRA adapter needs a name");
  }
  return absl::OkStatus();
}

void AdapterSlots::Set(int32_t slot, const LoraAdapter* adapter) {
  names_[slot] = adapter != nullptr ? adapter->name : "";
}

}  // namespace pagellm
