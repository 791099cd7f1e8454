// AdmissionQueue: the router's one bounded queue of Generate requests waiting for a worker,
// first come, first served, or with Options::by_priority in (priority, arrival) order (vLLM's
// --scheduling-policy priority: a smaller AdmissionTicket::priority goes first).
//
// Requests leave in that order: Pump() asks a Placer about the request at the head only, and
// stops at the first one that must wait, so a later (smaller) request never overtakes an earlier
// one of the same priority. A request leaves the queue exactly once, by one of
//   - Pump(): placed (QueuedRequest::OnDispatched) or refused by the placer (OnRejected);
//   - Expire(): its deadline passed (OnRejected with DeadlineExceeded);
//   - Remove(): its owner withdrew it (no callback; the owner knows).
// Callbacks run on the thread that called Pump()/Expire(), outside the queue's lock, in queue
// order; the owner may call back into the queue from them.
//
// Thread-safe. Knows nothing of gRPC: workers are opaque to it.
#ifndef PAGELLM_ROUTER_ADMISSION_QUEUE_H_
#define PAGELLM_ROUTER_ADMISSION_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pagellm {

class WorkerEndpoint;  // router/worker_pool.h; opaque here

// Where a request goes: the worker and the KV blocks reserved for it there.
struct Placement {
  std::shared_ptr<WorkerEndpoint> worker;
  int64_t reserved_blocks = 0;
  // The prompt's full-block prefix-cache hashes there: blocks it will have once it prefilled.
  std::vector<uint64_t> prefix_hashes;
  // Prompt tokens the placer expects the worker to have cached (cache-aware routing).
  int64_t expected_hit_tokens = 0;
};

// What the queue and the placer know of a request.
struct AdmissionTicket {
  int64_t prompt_tokens = 0;
  // The prompt itself (borrowed: valid while the request is queued) and its prefix-cache
  // namespace (common/prefix_cache/block_hash.h), for cache-aware placement. Empty: unknown.
  std::span<const int32_t> prompt_ids;
  uint64_t cache_namespace = 0;
  // The LoRA adapter it runs with (borrowed like prompt_ids); empty: the base model. Only
  // workers that serve it are candidates.
  std::string_view lora_adapter;
  // False for a request whose prompt is computed in full anyway (prompt logprobs): its blocks
  // still feed the worker's cache, but none are reused.
  bool reuses_cached_prefix = true;
  absl::Time deadline = absl::InfiniteFuture();
  // Its place in a by_priority queue: smaller first (ignored otherwise).
  int32_t priority = 0;
  // A worker that already failed this request (retry elsewhere); null on the first attempt.
  const WorkerEndpoint* avoid = nullptr;
};

// A request waiting in the queue. Implemented by the Generate reactor and by test fakes.
class QueuedRequest {
 public:
  virtual ~QueuedRequest() = default;
  // The request left the queue for `placement`. Called once, outside the queue's lock.
  virtual void OnDispatched(Placement placement) = 0;
  // The request left the queue without a worker (refused, or its deadline passed).
  virtual void OnRejected(absl::Status status) = 0;
};

// Decides for the request at the head of the queue.
class Placer {
 public:
  enum class Decision { kWait, kPlace, kReject };
  virtual ~Placer() = default;
  // kPlace fills `placement` (and reserves its capacity); kReject fills `error`; kWait leaves the
  // request at the head until the next Pump(). Called with the queue's lock held: it must not
  // call into the queue.
  virtual Decision Place(const AdmissionTicket& ticket, Placement* placement,
                         absl::Status* error) = 0;
};

class AdmissionQueue {
 public:
  struct Options {
    size_t max_size = 1024;    // requests waiting at once; Push() beyond it fails
    bool by_priority = false;  // order by (ticket.priority, arrival) rather than arrival
  };

  explicit AdmissionQueue(Options options) : options_(options) {}
  AdmissionQueue(const AdmissionQueue&) = delete;
  AdmissionQueue& operator=(const AdmissionQueue&) = delete;

  // Queues `request` (borrowed: it must stay alive until it leaves the queue) after every
  // request of its priority or a higher one. Returns its id for Remove(), or ResourceExhausted
  // when the queue is full.
  absl::StatusOr<uint64_t> Push(QueuedRequest* request, const AdmissionTicket& ticket);
  // Puts an already admitted request back at the head of its priority (a retry after a worker
  // failed before producing anything). Ignores max_size: the request was counted when it first
  // came.
  uint64_t PushFront(QueuedRequest* request, const AdmissionTicket& ticket);

  // Takes request `id` out. Returns false when it is no longer queued: then Pump()/Expire() has
  // taken it and its callback has run or is about to run.
  bool Remove(uint64_t id);

  // Dispatches from the head while `placer` places requests (see the file comment). Concurrent
  // calls are serialized: one thread dispatches and looks again after every batch; the others
  // return at once. Callbacks fire in queue order.
  void Pump(Placer& placer);

  // Rejects every request whose deadline is at or before `now` with DeadlineExceeded.
  void Expire(absl::Time now);

  [[nodiscard]] size_t size() const;
  [[nodiscard]] bool by_priority() const { return options_.by_priority; }

 private:
  struct Entry {
    uint64_t id;
    QueuedRequest* request;
    AdmissionTicket ticket;
    int32_t rank;  // the ticket's priority when by_priority, else 0
  };

  [[nodiscard]] int32_t Rank(const AdmissionTicket& ticket) const {
    return options_.by_priority ? ticket.priority : 0;
  }

  const Options options_;
  mutable absl::Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool pumping_ ABSL_GUARDED_BY(mu_) = false;  // a thread is inside Pump()'s loop
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_ADMISSION_QUEUE_H_
