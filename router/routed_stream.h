// RoutedStream: one Generate request through the router, from its client's side to a worker's
// stream, whatever the client speaks (GenerateReactor: a gRPC client; the OpenAI HTTP API
// reaches it in-process, without a second gRPC hop).
//
// Life of a stream:
//   1. the constructor validates the request (prompt -> ids, limits); Start queues it
//      (AdmissionQueue), or finishes the stream at once for a bad request or a full queue;
//   2. OnDispatched starts the worker call with the client's deadline (or now +
//      request_timeout when the client set none);
//   3. each message read from the worker gets the client's request_id and is handed to the
//      client (Client::StartWrite), one at a time. Messages pass through a ring of kSlots reused
//      messages: at most one read and one write are in flight, and reading pauses while the
//      ring is full (the client's flow control reaches the worker);
//   4. the worker's status ends the stream (Client::Finish) once the ring is written out. A
//      worker that fails with UNAVAILABLE (or drops the call) before sending anything is
//      retried once elsewhere; after that the client gets UNAVAILABLE. A stream of samples
//      (no beam search, no embedding) that has tokens and an unfinished sample is resumed once
//      on another worker: the request goes there with each sample's tokens read so far
//      (WorkerGenerateRequest.resumed_output_token_ids for one sample, resumed_samples for
//      several, with the finished ones marked), and that worker sends what follows them. A
//      request without a seed gets one from the router, so that a resumed sample draws what the
//      first worker would have drawn. Any other request that fails after sending
//      something is retried once when the client is Restartable (it keeps the whole answer
//      until Finish, so nobody has seen the first attempt's messages): Restart() first.
//      A worker that fails once its answer is whole -- after its last message (the one with
//      usage), or after every sample's last token -- does not fail the stream: it finishes OK,
//      with the usage the worker would have sent made up by the router in the second case.
// Cancellation (Cancel: the client left; or the deadline) withdraws a queued request or
// cancels the worker call; the stream finishes when the worker call is over.
//
// Thread-safety: the client, gRPC and the admission queue call in from their threads; all state
// is under mu_. gRPC operations on the worker call are started under mu_ (gRPC never runs their
// reactions inline). The Client's methods are called with mu_ released, so the client may call
// back into the stream from them and may hold its own lock while calling the stream.
#ifndef PAGELLM_ROUTER_ROUTED_STREAM_H_
#define PAGELLM_ROUTER_ROUTED_STREAM_H_

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

class RoutedStream final : public QueuedRequest {
 public:
  // The client's side of the stream.
  class Client {
   public:
    virtual ~Client() = default;
    // Starts delivering `m` (valid until the write is done). Returns true when it is done
    // already (nothing to send, or the client is gone and Cancel is coming): the stream goes
    // on as after OnWriteDone(true). Returns false when the client will call OnWriteDone.
    virtual bool StartWrite(const v1::GenerateResponse& m) = 0;
    // The stream is over with `status`; called once, and last: the client may destroy the
    // stream inside this call.
    virtual void Finish(const absl::Status& status) = 0;
    // True when what the stream writes reaches nobody before Finish (a client that buffers
    // the whole answer). The same value for the client's whole life.
    [[nodiscard]] virtual bool Restartable() const { return false; }
    // Only for a Restartable client: forget every message written so far, the stream starts
    // over on another worker. Called with the stream's lock held: it must not call the stream.
    virtual void Restart() {}
  };

  // Borrowed collaborators; they outlive every stream.
  struct Deps {
    AdmissionQueue* queue = nullptr;
    WorkerPool* pool = nullptr;
    RouterMetrics* metrics = nullptr;
    absl::Duration request_timeout = absl::Seconds(600);  // when the client sets no deadline
    std::function<void()> on_done;                        // called by each stream's destructor
  };

  // Messages buffered between the worker and the client, per stream.
  static constexpr int kSlots = 4;
  static_assert(kSlots > 1, "the message being written and a newer one");

  // A stream for `client` (borrowed until Finish). `client_deadline`: InfiniteFuture when the
  // client set none. Nothing happens until Start.
  RoutedStream(const Deps& deps, const ModelContext& model, const v1::GenerateRequest& request,
               absl::Time client_deadline, Client* client);
  // REQUIRES: Start was not called, or Finish was.
  ~RoutedStream() override;
  RoutedStream(const RoutedStream&) = delete;
  RoutedStream& operator=(const RoutedStream&) = delete;

  // Queues the request. May call client->Finish before it returns (a bad request, a full
  // queue), or any Client method from another thread once it has started. Called once.
  void Start();
  // From the client: the write of StartWrite is done (ok) or failed (the client is gone).
  void OnWriteDone(bool ok);
  // From the client: it is gone (cancelled, disconnected). Harmless after Finish.
  void Cancel();

  // QueuedRequest.
  void OnDispatched(Placement placement) override;
  void OnRejected(absl::Status status) override;

 private:
  class WorkerCall;
  // Work decided under mu_ and done after releasing it, in this order.
  struct After {
    std::optional<Placement> release;
    std::shared_ptr<WorkerEndpoint> report_down;
    std::shared_ptr<WorkerEndpoint> ended;  // the worker call ended: WorkerPool::Ended
    bool pump = false;
    bool queue_changed = false;
    const v1::GenerateResponse* write = nullptr;
    std::optional<absl::Status> finish;
  };

  void OnWorkerRead(bool ok);
  void OnWorkerDone(const grpc::Status& status);
  void StartAttemptLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLocked(After* after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartWriteLocked(After* after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CancelCallLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinishLocked(After* after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CancelStatus() const;
  // Does `after`. Once mu_ is released the client may finish the stream and destroy it, so Run
  // uses `self` only to write (no finish is possible while a write is outstanding) or to
  // finish, last, which nobody else can then have done.
  static void Run(const Deps& deps, RoutedStream* self, After after);

  const Deps& deps_;
  Client* const client_;
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
  bool writing_ ABSL_GUARDED_BY(mu_) = false;      // a client write is outstanding
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;
  // The request may be resumed (see 4. above); then `samples_` holds, per sample, its tokens
  // read from workers so far and whether a worker finished it.
  struct Sample {
    std::vector<int32_t> tokens;
    bool finished = false;
  };
  // Whether some sample has tokens and some can go on (unfinished, under max_tokens).
  bool CanResumeLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts the samples' tokens into worker_request_ for the next worker.
  void SetResumedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether every sample has had its last token (a resumable stream only).
  bool AllSamplesFinishedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the stream's last message (finished, with usage) in place of the worker's.
  void AddLastMessageLocked(After* after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool resumable_ = false;
  bool return_prompt_ids_ = false;  // GenerateRequest.return_prompt_token_ids
  int32_t max_tokens_ = 0;
  std::vector<Sample> samples_ ABSL_GUARDED_BY(mu_);
  bool got_response_ ABSL_GUARDED_BY(mu_) = false;  // this stream has read a worker message
  bool got_last_ ABSL_GUARDED_BY(mu_) = false;      // ... and the last one (finished, usage)
  bool got_token_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;  // cancelled, deadline, or a write failed
  bool started_ ABSL_GUARDED_BY(mu_) = false;      // Start was called
  bool finished_ ABSL_GUARDED_BY(mu_) = false;     // Finish has been (or is being) called
  std::optional<absl::Status> outcome_ ABSL_GUARDED_BY(mu_);  // how to finish, once known
  // Ring: slots_[(head_ + i) % kSlots], i < count_, read and not yet written; the write in
  // flight, if any, is slots_[head_]; a read in flight fills slots_[read_slot_], which is
  // (head_ + count_) % kSlots while the client is there.
  std::array<v1::GenerateResponse, kSlots> slots_ ABSL_GUARDED_BY(mu_);
  int head_ ABSL_GUARDED_BY(mu_) = 0;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
  int read_slot_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_ROUTED_STREAM_H_
