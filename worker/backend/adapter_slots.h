// AdapterSlots: the names of a backend's LoRA adapter slots (Backend::adapter_names) and the
// checks every backend's SetAdapter makes before it changes one. Not thread-safe (the engine
// thread's, as the backend).
#ifndef PAGELLM_WORKER_BACKEND_ADAPTER_SLOTS_H_
#define PAGELLM_WORKER_BACKEND_ADAPTER_SLOTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pagellm {

struct LoraAdapter;  // worker/model/lora_adapter.h

class AdapterSlots {
 public:
  // `loaded` fill the first slots; `slots` in all (at least loaded.size()).
  AdapterSlots(std::vector<std::string> loaded, int64_t slots);
  AdapterSlots(const std::vector<std::shared_ptr<const LoraAdapter>>& loaded, int64_t slots);

  [[nodiscard]] const std::vector<std::string>& names() const { return names_; }
  // InvalidArgument unless `slot` exists and is empty (for an adapter, which must have a name)
  // or full (for null).
  [[nodiscard]] absl::Status Check(int32_t slot, const LoraAdapter* adapter) const;
  // Records the change Check allowed.
  void Set(int32_t slot, const LoraAdapter* adapter);

 private:
  std::vector<std::string> names_;  // "" for an empty slot
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_ADAPTER_SLOTS_H_
