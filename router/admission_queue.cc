// Invariants: entries_ is in admission order within each priority (PushFront puts retries first
// in theirs), priorities ascending (all 0 unless by_priority); an entry is in
// entries_ until exactly one of Pump/Expire/Remove takes it out under mu_. Pump's callbacks run
// after the lock is released, and only the thread that set pumping_ runs them, so requests are
// dispatched one thread at a time in queue order.
#include "router/admission_queue.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pagellm {

absl::StatusOr<uint64_t> AdmissionQueue::Push(QueuedRequest* request,
                                              const AdmissionTicket& ticket) {
  absl::MutexLock lock(&mu_);
  if (entries_.size() >= options_.max_size) {
    return absl::ResourceExhaustedError(absl::StrCat("the router's admission queue is full (",
                                                     options_.max_size, " requests waiting)"));
  }
  const uint64_t id = next_id_++;
  const int32_t rank = Rank(ticket);
  // After every entry of the same or a smaller priority.
  auto at = std::upper_bound(entries_.begin(), entries_.end(), rank,
                             [](int32_t r, const Entry& e) { return r < e.rank; });
  entries_.insert(at, Entry{id, request, ticket, rank});
  return id;
}

uint64_t AdmissionQueue::PushFront(QueuedRequest* request, const AdmissionTicket& ticket) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  const int32_t rank = Rank(ticket);
  // Before every entry of the same or a larger priority.
  auto at = std::lower_bound(entries_.begin(), entries_.end(), rank,
                             [](const Entry& e, int32_t r) { return e.rank < r; });
  entries_.insert(at, Entry{id, request, ticket, rank});
  return id;
}

bool AdmissionQueue::Remove(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it =
      std::find_if(entries_.begin(), entries_.end(), [id](const Entry& e) { return e.id == id; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  return true;
}

void AdmissionQueue::Pump(Placer& placer) {
  {
    absl::MutexLock lock(&mu_);
    // The pumping thread looks at the queue again after each batch, so it will see whatever
    // made this caller pump.
    if (pumping_) return;
    pumping_ = true;
  }
  struct Outcome {
    QueuedRequest* request;
    Placer::Decision decision;
    Placement placement;
    absl::Status error;
  };
  std::vector<Outcome> batch;
  for (;;) {
    batch.clear();
    {
      absl::MutexLock lock(&mu_);
      while (!entries_.empty()) {
        Outcome o{entries_.front().request, Placer::Decision::kWait, {}, absl::OkStatus()};
        o.decision = placer.Place(entries_.front().ticket, &o.placement, &o.error);
        if (o.decision == Placer::Decision::kWait) break;
        entries_.pop_front();
        batch.push_back(std::move(o));
      }
      if (batch.empty()) {
        pumping_ = false;
        return;
      }
    }
    for (Outcome& o : batch) {
      if (o.decision == Placer::Decision::kPlace) {
        o.request->OnDispatched(std::move(o.placement));
      } else {
        o.request->OnRejected(std::move(o.error));
      }
    }
  }
}

void AdmissionQueue::Expire(absl::Time now) {
  std::vector<QueuedRequest*> expired;
  {
    absl::MutexLock lock(&mu_);
    auto keep = std::stable_partition(entries_.begin(), entries_.end(),
                                      [now](const Entry& e) { return e.ticket.deadline > now; });
    for (auto it = keep; it != entries_.end(); ++it) expired.push_back(it->request);
    entries_.erase(keep, entries_.end());
  }
  for (QueuedRequest* r : expired) {
    r->OnRejected(absl::DeadlineExceededError("deadline passed while waiting for a worker"));
  }
}

size_t AdmissionQueue::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace pagellm
