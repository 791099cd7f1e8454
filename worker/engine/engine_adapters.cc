// Engine: the LoRA adapters it serves -- loading and unloading them while serving, moving them
// into the backend's slots as steps need them, and letting go of their host copies (and reading
// them again) when more are served than host memory holds. See AdapterTable.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/prefix_cache/block_hash.h"
#include "common/status_macros.h"
#include "worker/engine/engine.h"

namespace pagellm {

absl::Status Engine::LoadAdapter(std::shared_ptr<const LoraAdapter> adapter) {
  if (adapter == nullptr || adapter->name.empty()) {
    return absl::InvalidArgumentError("a LoRA adapter needs a name");
  }
  if (!backend_->adapters_can_change()) return backend_->AdaptersFixed();
  if (adapters_.full() && !adapters_.Find(adapter->name).ok()) {
    if (!adapter_reader_) {  // nothing could read an evicted adapter again
      return absl::ResourceExhaustedError(absl::StrCat("this worker holds ", adapters_.num_held(),
                                                       " LoRA adapters already (--max-cpu-loras)"));
    }
    const int32_t victim = adapters_.EvictionCandidate();
    if (victim < 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "all ", adapters_.num_held(),
          " LoRA adapters held in host memory (--max-cpu-loras) have requests: retry once some "
          "of them end"));
    }
    EvictAdapter(victim);
  }
  ASSIGN_OR_RETURN(const int32_t id, adapters_.Add(std::move(adapter)));
  // Into a slot now where one is free (or idle): the backend checks that it fits.
  const int32_t slot = adapters_.SlotToFill(adapter_step_);
  adapters_.Touch(id, adapter_step_);  // newer than those used before it (LRU, as vLLM's)
  if (slot < 0) return absl::OkStatus();
  if (absl::Status st = PlaceAdapter(id, slot); !st.ok()) {
    PAGELLM_CHECK(adapters_.Retire(id), "a new LoRA adapter has requests");
    DropAdapter(id);
    return st;
  }
  return absl::OkStatus();
}

absl::Status Engine::UnloadAdapter(const std::string& name) {
  if (!backend_->adapters_can_change()) return backend_->AdaptersFixed();
  ASSIGN_OR_RETURN(const int32_t id, adapters_.Find(name));
  if (adapters_.Retire(id)) DropAdapter(id);
  return absl::OkStatus();
}

void Engine::set_adapter_reader(AdapterReader reader) { adapter_reader_ = std::move(reader); }

void Engine::ReleaseAdapter(int32_t id) {
  if (adapters_.Release(id)) {
    DropAdapter(id);
  } else if (!reads_due_.empty() && adapters_.users(id) == 0) {
    StartReads();  // `id` may make room for an adapter that requests wait for
  }
}

void Engine::DropAdapter(int32_t id) {
  const int32_t slot = adapters_.Drop(id);
  if (slot >= 0) EmptySlot(slot);
  // A fixed adapter's slot now takes moving ones.
  scheduler_->set_lora_slots(adapters_.moving_slots());
  if (!reads_due_.empty()) StartReads();
}

void Engine::EvictAdapter(int32_t id) {
  const int32_t slot = adapters_.Evict(id);
  if (slot >= 0) EmptySlot(slot);
}

bool Engine::EmptySlot(int32_t slot) {
  // A backend that cannot let go of an adapter (a broken tensor-parallel group) keeps the slot
  // out of use: never named, never reused.
  if (const absl::Status st = backend_->SetAdapter(slot, nullptr); !st.ok()) {
    PLOG_ERROR("LoRA slot {} stays out of use: emptying it failed: {}", slot, st.ToString());
    adapters_.BreakSlot(slot);
    scheduler_->set_lora_slots(adapters_.moving_slots());
    return false;
  }
  return true;
}

void Engine::ParkForAdapter(SequenceGroup* group) {
  group->parked = true;
  parked_.push_back(group);
  const int32_t id = group->adapter;
  if (adapters_.NeedsRead(id) &&
      std::find(reads_due_.begin(), reads_due_.end(), id) == reads_due_.end()) {
    reads_due_.push_back(id);
    StartReads();
  }
}

void Engine::StartReads() {
  while (!reads_due_.empty()) {
    const int32_t id = reads_due_.front();
    // Its requests may have ended (and the adapter been dropped) since it was due.
    if (adapters_.users(id) == 0 || !adapters_.NeedsRead(id)) {
      reads_due_.pop_front();
      continue;
    }
    if (adapters_.full()) {
      const int32_t victim = adapters_.EvictionCandidate();
      if (victim < 0) return;  // every adapter held has requests: one of them ends first
      EvictAdapter(victim);
    }
    reads_due_.pop_front();
    const uint64_t ticket = adapters_.BeginRead(id);
    ++adapter_reads_;
    adapter_reader_(id, ticket, LoraModuleSpec{adapters_.name(id), adapters_.path(id)});
  }
}

void Engine::AdapterRead(int32_t id, uint64_t ticket,
                         absl::StatusOr<std::shared_ptr<const LoraAdapter>> result,
                         std::vector<std::string>* failed) {
  if (result.ok() && *result == nullptr) result = absl::InternalError("no adapter was read");
  bool renamespaced = false;
  if (!adapters_.EndRead(id, ticket, result.ok() ? *result : nullptr, &renamespaced)) return;
  std::vector<SequenceGroup*> waited;
  std::erase_if(parked_, [&](SequenceGroup* g) {
    if (g->adapter != id) return false;
    waited.push_back(g);
    g->parked = false;
    return true;
  });
  if (result.ok()) {
    if (renamespaced) {
      PLOG_WARN(
          "LoRA adapter `{}` was read again and its files had changed since it was loaded: its "
          "requests no longer share cached prefixes with those before",
          adapters_.name(id));
    }
    for (SequenceGroup* g : waited) {
      g->cache_namespace =
          SaltedCacheNamespace(adapters_.cache_namespace(id), g->params.cache_salt);
      scheduler_->Add(g);
    }
  } else {
    PLOG_ERROR("LoRA adapter `{}` could not be read again from its directory: {}",
               adapters_.name(id), result.status().ToString());
    for (SequenceGroup* g : waited) {
      failed->push_back(g->request_id);
      EraseGroup(g);
    }
  }
  StartReads();  // a failed read made room
}

absl::Status Engine::PlaceAdapter(int32_t id, int32_t slot) {
  if (adapters_.slot(id) >= 0) return absl::OkStatus();
  if (adapters_.Vacate(slot) && !EmptySlot(slot)) {
    return absl::InternalError(absl::StrCat("LoRA slot ", slot, " could not be emptied"));
  }
  RETURN_IF_ERROR(backend_->SetAdapter(slot, adapters_.weights(id)));
  adapters_.Place(id, slot);
  ++adapter_loads_;
  return absl::OkStatus();
}

absl::Status Engine::PlaceAdapters(const SchedulerOutput& sched) {
  bool any = false;
  for (const ScheduledSeq& s : sched.seqs) any = any || s.group->adapter_swaps;
  if (!any) return absl::OkStatus();
  const int64_t step = ++adapter_step_;
  for (const ScheduledSeq& s : sched.seqs) {
    if (s.group->adapter >= 0) adapters_.Touch(s.group->adapter, step);
  }
  for (const ScheduledSeq& s : sched.seqs) {
    const int32_t id = s.group->adapter;
    if (!s.group->adapter_swaps || adapters_.slot(id) >= 0) continue;
    const int32_t slot = adapters_.SlotToFill(step);
    if (slot < 0) {
      return absl::InternalError(
          absl::StrCat("no LoRA slot for adapter `", adapters_.name(id),
                       "`: the step needs more adapters than the slots hold"));
    }
    RETURN_IF_ERROR(PlaceAdapter(id, slot));
  }
  return absl::OkStatus();
}

}  // namespace pagellm
