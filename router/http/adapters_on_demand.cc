#include "router/http/adapters_on_demand.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pagellm {

AdaptersOnDemand::AdaptersOnDemand(Change change, int max_loading)
    : change_(std::move(change)), max_loading_(max_loading) {}

void AdaptersOnDemand::Load(const std::string& name, Done done) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = loading_.find(name); it != loading_.end()) {
      it->second.push_back(std::move(done));
      return;
    }
    if (static_cast<int>(loading_.size()) < max_loading_) {
      loading_[name].push_back(std::move(done));
      done = nullptr;
    }
  }
  if (done != nullptr) {
    done(absl::ResourceExhaustedError(
        absl::StrCat(max_loading_, " LoRA adapters are being loaded on demand already: retry")));
    return;
  }
  LoraChangeRequest change;
  change.load = true;
  change.lora_name = name;
  change.lora_path = name;  // inside each worker's --lora-dir
  change_(change, [this, name](absl::Status st) { Finish(name, std::move(st)); });
}

void AdaptersOnDemand::Finish(const std::string& name, absl::Status status) {
  if (absl::IsAlreadyExists(status)) status = absl::OkStatus();
  std::vector<Done> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = loading_.find(name);
    if (it == loading_.end()) return;
    waiters = std::move(it->second);
    loading_.erase(it);
  }
  for (Done& d : waiters) d(status);
}

}  // namespace pagellm
