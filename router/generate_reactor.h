// GenerateReactor: one client Generate stream through the router, both sides of it.
//
// Server side (ServerWriteReactor) toward the client, client side (WorkerCall, a
// ClientReadReactor) toward the chosen worker. Life of a stream:
//   1. the constructor validates the request (prompt -> ids, limits) and queues it
//      (AdmissionQueue); a bad request or a full queue finishes the stream at once;
//   2. OnDispatched starts the worker call with the client's deadline (or now +
//      request_timeout when the client set none);
//   3. each message read from the worker gets the client's request_id and is written to the
//      client. Messages pass through a ring of kSlots reused messages: at most one read and one
//      write are in flight, and reading pauses while the ring is full (the client's flow
//      control reaches the worker);
//   4. the worker's status ends the stream once the ring is written out. A worker that fails
//      with UNAVAILABLE (or drops the call) before sending anything is retried once elsewhere;
//      after that the client gets UNAVAILABLE.
// Cancellation (client cancel, disconnect, deadline) withdraws a queued request or cancels the
// worker call; the stream finishes when the worker call is over.
//
// Thread-safety: gRPC and the admission queue call in from their threads; all state is under
// mu_. gRPC operations are started under mu_ (their reactions are never inlined by gRPC);
// Finish and calls that may reenter other reactors (pool, queue pump) run after mu_ is released.
// The reactor deletes itself in OnDone.
#ifndef PAGELLM_ROUTER_GENERATE_REACTOR_H_
#define PAGELLM_ROUTER_GENERATE_REACTOR_H_

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/generation.pb.h"
#include "pagellm/v1/worker.grpc.pb.h"
#include "router/admission_queue.h"
#include "router/model_context.h"
#include "router/router_metrics.h"
#include "router/worker_pool.h"

namespace pagellm {

class GenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                              public QueuedRequest {
 public:
  // Borrowed collaborators; they outlive every stream (the server shuts down first).
  struct Deps {
    AdmissionQueue* queue = nullptr;
    WorkerPool* pool = nullptr;
    RouterMetrics* metrics = nullptr;
    absl::Duration request_timeout = absl::Seconds(600);  // when the client sets no deadline
    std::function<void()> on_done;                        // the stream is over (called from OnDone)
  };

  // Messages buffered between the worker and the client, per stream.
  static constexpr int kSlots = 4;

  GenerateReactor(const Deps& deps, const ModelContext& model, grpc::CallbackServerContext* context,
                  const v1::GenerateRequest& request);

  // QueuedRequest.
  void OnDispatched(Placement placement) override;
  void OnRejected(absl::Status status) override;

  // ServerWriteReactor.
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class WorkerCall;
  // Work decided under mu_ and done after releasing it, in this order.
  struct After {
    std::optional<Placement> release;
    std::shared_ptr<WorkerEndpoint> report_down;
    bool pump = false;
    bool queue_changed = false;
    std::optional<grpc::Status> finish;
  };

  ~GenerateReactor() override = default;

  void OnWorkerRead(bool ok);
  void OnWorkerDone(const grpc::Status& status);
  void StartAttemptLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLocked(After* after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CancelCallLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinishLocked(After* after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CancelStatus() const;
  // Does `after`. Once mu_ is released another thread may finish the stream and delete the
  // reactor, so Run uses `self` only to Finish, which nobody else can then have done.
  static void Run(const Deps& deps, GenerateReactor* self, After after);

  const Deps& deps_;
  grpc::CallbackServerContext* const context_;
  const absl::Time arrival_;
  std::string client_request_id_;
  absl::Time deadline_ = absl::InfiniteFuture();
  v1::WorkerGenerateRequest worker_request_;  // immutable once queued; read by the calls

  absl::Mutex mu_;
  AdmissionTicket ticket_ ABSL_GUARDED_BY(mu_);
  bool queued_ ABSL_GUARDED_BY(mu_) = false;  // in the admission queue (queue_id_ valid)
  uint64_t queue_id_ ABSL_GUARDED_BY(mu_) = 0;
  // The current attempt's worker and reservation; `reserved` until the first response.
  Placement placement_ ABSL_GUARDED_BY(mu_);
  bool reserved_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<WorkerEndpoint> failed_worker_ ABSL_GUARDED_BY(mu_);  // keeps ticket_.avoid valid
  std::unique_ptr<WorkerCall> call_ ABSL_GUARDED_BY(mu_);               // null between attempts
  bool call_active_ ABSL_GUARDED_BY(mu_) = false;  // started, OnDone not yet seen
  bool hold_ ABSL_GUARDED_BY(mu_) = false;         // call_ has our AddHold
  bool reading_ ABSL_GUARDED_BY(mu_) = false;      // a read is outstanding on call_
  bool read_closed_ ABSL_GUARDED_BY(mu_) = false;  // the worker's stream has ended
  bool writing_ ABSL_GUARDED_BY(mu_) = false;      // a write to the client is outstanding
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;
  bool got_response_ ABSL_GUARDED_BY(mu_) = false;  // this stream has read a worker message
  bool got_token_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;  // cancelled, deadline, or a write failed
  bool finished_ ABSL_GUARDED_BY(mu_) = false;     // Finish has been (or is being) called
  std::optional<absl::Status> outcome_ ABSL_GUARDED_BY(mu_);  // how to finish, once known
  // Ring: slots_[(head_ + i) % kSlots], i < count_, read and not yet written; the write in
  // flight, if any, is slots_[head_]; a read in flight fills slots_[read_slot_], which is
  // (head_ + count_) % kSlots while the client is there.
  std::array<v1::GenerateResponse, kSlots> slots_ ABSL_GUARDED_BY(mu_);
  // The slot being written, serialized (the Generate method is raw: see request_bytes.h).
  // Valid while writing_.
  grpc::ByteBuffer wire_ ABSL_GUARDED_BY(mu_);
  // Serializes `m` into wire_ and returns it, for StartWrite.
  const grpc::ByteBuffer* Serialize(const v1::GenerateResponse& m)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int head_ ABSL_GUARDED_BY(mu_) = 0;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
  int read_slot_ ABSL_GUARDED_BY(mu_) = 0;
};

// A stream finished before it started (router not ready, draining): Finish(status) at once.
class RejectedGenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  RejectedGenerateReactor(RouterMetrics* metrics, const grpc::Status& status);
  void OnDone() override { delete this; }
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_GENERATE_REACTOR_H_
