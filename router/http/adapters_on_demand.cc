#include "router/http/adapters_on_demand.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pagellm {

AdaptersOnDemand::AdaptersOnDemand(Change change)
    : AdaptersOnDemand(std::move(change), Options()) {}

AdaptersOnDemand::AdaptersOnDemand(Change change, Options options)
    : change_(std::move(change)), options_(std::move(options)) {}

void AdaptersOnDemand::Load(const std::string& name, Done done) {
  absl::Status answer;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = loading_.find(name); it != loading_.end()) {
      it->second.push_back(std::move(done));
      return;
    }
    if (auto it = not_found_.find(name); it != not_found_.end()) {
      if (options_.clock() < it->second.until) {
        answer = it->second.status;
      } else {
        not_found_.erase(it);
      }
    }
    if (answer.ok()) {
      if (static_cast<int>(loading_.size()) < options_.max_loading) {
        loading_[name].push_back(std::move(done));
        done = nullptr;
      } else {
        answer = absl::ResourceExhaustedError(absl::StrCat(
            options_.max_loading, " LoRA adapters are being loaded on demand already: retry"));
      }
    }
  }
  if (done != nullptr) {
    done(std::move(answer));
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
    if (absl::IsNotFound(status)) RememberNotFoundLocked(name, status, options_.clock());
  }
  for (Done& d : waiters) d(status);
}

void AdaptersOnDemand::RememberNotFoundLocked(const std::string& name, const absl::Status& status,
                                              absl::Time now) {
  if (options_.max_not_found == 0 || options_.not_found_for <= absl::ZeroDuration()) return;
  if (not_found_.size() >= options_.max_not_found && !not_found_.contains(name)) {
    for (auto it = not_found_.begin(); it != not_found_.end();) {
      if (it->second.until <= now) {
        not_found_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  if (not_found_.size() >= options_.max_not_found && !not_found_.contains(name)) {
    auto soonest = not_found_.begin();
    for (auto it = not_found_.begin(); it != not_found_.end(); ++it) {
      if (it->second.until < soonest->second.until) soonest = it;
    }
    not_found_.erase(soonest);
  }
  not_found_[name] = NotFound{status, now + options_.not_found_for};
}

}  // namespace pagellm
