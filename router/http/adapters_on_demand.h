// AdaptersOnDemand: loads a LoRA adapter by name when a request names one that no worker serves
// (vLLM's lora_filesystem_resolver: a request for model NAME loads the adapter in the directory
// NAME of the resolver's directory). Here that directory is each worker's --lora-dir: the load
// goes to every ready worker as /v1/load_lora_adapter {"lora_name": NAME, "lora_path": NAME}
// would (ChangeWorkerAdapters), and each worker resolves NAME inside its --lora-dir only.
//
// Requests that name the same adapter while it loads wait for that one load. At most
// `max_loading` names load at once; a request for another gets ResourceExhausted, so a client
// cannot make the workers probe their disks for names without bound (and each load that
// succeeds counts against the workers' served adapters, kMaxServedLoraAdapters).
//
// A name that no worker has a directory for (the load's NotFound) is answered NotFound at once
// for `not_found_for` (10 s) after, without asking the workers again: a client that keeps
// naming a model that does not exist costs the workers one search per name per 10 s, not one
// per request. At most `max_not_found` names are remembered; a directory added meanwhile is
// found once its name's time is over (an adapter loaded through /v1/load_lora_adapter is served
// at once: served names never reach this class).
//
// Thread-safe. `done` runs once, on the thread that ends the load (a gRPC thread, or the caller's
// when it fails at once), and must not block.
#ifndef PAGELLM_ROUTER_HTTP_ADAPTERS_ON_DEMAND_H_
#define PAGELLM_ROUTER_HTTP_ADAPTERS_ON_DEMAND_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "router/http/openai_request.h"

namespace pagellm {

class AdaptersOnDemand {
 public:
  using Done = std::function<void(absl::Status)>;
  // Applies a LoRA change on the workers (OpenAiFrontend::Deps::change_adapters).
  using Change = std::function<void(const LoraChangeRequest& change, Done done)>;
  struct Options {
    int max_loading = 16;
    absl::Duration not_found_for = absl::Seconds(10);
    size_t max_not_found = 4096;
    std::function<absl::Time()> clock = [] { return absl::Now(); };
  };

  explicit AdaptersOnDemand(Change change);
  AdaptersOnDemand(Change change, Options options);
  AdaptersOnDemand(const AdaptersOnDemand&) = delete;
  AdaptersOnDemand& operator=(const AdaptersOnDemand&) = delete;

  // Loads adapter `name` (a valid adapter name: CheckLoraAdapterName) on the workers, or joins
  // the load of it under way. `done` gets the load's outcome (AlreadyExists counts as OK: some
  // other load won), or the NotFound remembered for the name; ResourceExhausted when
  // `max_loading` other names are loading.
  void Load(const std::string& name, Done done);

 private:
  struct NotFound {
    absl::Status status;  // the load's
    absl::Time until;
  };

  void Finish(const std::string& name, absl::Status status);
  // Remembers `name`'s NotFound, making room among max_not_found names: expired ones go first,
  // then the one that would expire soonest.
  void RememberNotFoundLocked(const std::string& name, const absl::Status& status, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Change change_;
  const Options options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<Done>> loading_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, NotFound> not_found_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_ADAPTERS_ON_DEMAND_H_
