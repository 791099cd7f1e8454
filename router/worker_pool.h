// WorkerPool: the pagellm-worker processes the router sends requests to.
//
// Workers come from a static list (--workers) and/or a DNS name re-resolved periodically
// (--worker-dns, e.g. a Kubernetes headless service: each A record is a worker). Each worker's
// GetLoad is polled (PollAll, every ~200 ms by the caller) with a short deadline; a worker is
// ready while its last poll succeeded, it is not draining, and no call to it has failed with
// UNAVAILABLE since. A worker that fails is not used until a poll succeeds again, so a restarted
// worker comes back by itself. Workers that disappear from DNS are dropped (calls in flight to
// them finish: callers hold a shared_ptr).
//
// As the admission queue's Placer it picks among ready workers with room. Room: the worker's own
// queue was empty at the last poll, not counting requests that produced their first response
// since that poll was sent (requests wait in the router's queue, not in a worker's); its
// requests (running, waiting, and placed there and not yet visible in a poll, less those that
// ended since the last poll was sent) are fewer than its max_num_seqs, so that a burst arriving
// between two polls is not all sent to a worker that cannot start it, while a finished
// request's place is taken at once rather than at the next poll; and free blocks >= the blocks the
// request needs now, ceil(prompt / block_size) + 1, where free blocks = the last polled
// kv_blocks_free minus the blocks reserved by requests placed there. A reservation lasts until a
// poll sent after the request's first response (or its end) comes back: only then does the polled
// figure include what the worker allocated for it. While no worker has room the request waits.
//
// Which one (Options::policy):
//   - kMostFreeBlocks: the one with the most free KV blocks.
//   - kPrefixAware (the default; cache-aware routing as in SGLang's router and llm-d): the one
//     expected to hold the longest cached prefix of the prompt, ties to the most free blocks.
//     Each poll carries the worker's prefix-cache Bloom filter (fetched only when it changed;
//     common/prefix_cache/); the prompt's chained block hashes are looked up in it and in the
//     hashes of requests placed there whose blocks the last poll cannot show yet (same lifetime
//     as a reservation). So a tenant's system prompt or a conversation's history is prefilled
//     on one worker and reused there, instead of once per worker. The worker holding the
//     prefix may have requests in its own queue (free blocks permitting) as long as some worker
//     has room: waiting there briefly is cheaper than prefilling the prefix again. Load still
//     wins when it is lopsided: if that worker's load (running + waiting + placed and not yet
//     visible) exceeds the least loaded worker with room's by more than balance_abs and by a
//     factor of more than balance_rel, the request goes to the least loaded one instead (ties
//     to the most free blocks; the prefix is then computed there as well: popular prefixes
//     spread).
//
// LoRA adapters: each poll lists the adapters the worker serves (they may differ between workers,
// and change while it runs: runtime LoRA updating). A request for an adapter is placed only on a
// worker that serves it, and rejected with NotFound when no ready worker does. SetAdapters
// records a change the router made itself at once (polls sent before it do not undo it). A
// worker that becomes ready lacking adapters that every other ready worker loaded at run time
// (from the same path) is due to load them (TakeAdapterReplays): a restarted or added worker
// converges on what the fleet serves; one ready worker alone is never changed.
//
// Workers must serve the pool's model (SetModelFingerprint): each poll carries the worker's
// model fingerprint and limits (WorkerLoad), and a worker whose fingerprint differs is not
// ready (state kModelMismatch, logged once, counted in Stats) until it serves the model again.
// So a worker restarted with another model is never sent requests validated for this one.
// Stats also carries the smallest limits among ready workers, which the router validates
// against (a worker restarted with a smaller max_model_len lowers them at its next poll).
//
// A worker's state changes are logged once each, not on every poll.
//
// Thread-safe. on_change (given to Create) runs without the pool's lock after anything that may
// let a queued request go: a poll result, a DNS change, an ended request.
#ifndef PAGELLM_ROUTER_WORKER_POOL_H_
#define PAGELLM_ROUTER_WORKER_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/auth/secret_set.h"
#include "common/prefix_cache/prefix_filter.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/worker.grpc.pb.h"
#include "router/admission_queue.h"

namespace pagellm {

// One worker: its address and stub. The routing state is the pool's (guarded by its lock).
// How the router reaches its workers: TLS (optionally mutual) and the shared worker token.
struct WorkerSecurity {
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null: plaintext
  std::string tls_server_name;  // the name the workers' certificates carry; empty: the address
  std::string token;  // sent as kWorkerTokenHeader (secret_set.h) on every call; empty: none
};

class WorkerEndpoint {
 public:
  WorkerEndpoint(std::string address, bool from_dns, const WorkerSecurity& security = {});
  WorkerEndpoint(const WorkerEndpoint&) = delete;
  WorkerEndpoint& operator=(const WorkerEndpoint&) = delete;

  [[nodiscard]] const std::string& address() const { return address_; }
  // Thread-safe, like every gRPC stub.
  [[nodiscard]] v1::Worker::Stub& stub() const { return *stub_; }
  // Adds the worker token to a call's context. Every call to the worker goes through it.
  void Prepare(grpc::ClientContext* context) const {
    if (!token_.empty()) context->AddMetadata(kWorkerTokenHeader, token_);
  }

 private:
  friend class WorkerPool;

  const std::string address_;
  const bool from_dns_;
  const std::string token_;
  std::unique_ptr<v1::Worker::Stub> stub_;

  enum class State { kUnknown, kReady, kDraining, kDown, kModelMismatch };

  // Guarded by WorkerPool::mu_.
  bool ready_ = false;             // see the file comment
  State state_ = State::kUnknown;  // the last state logged
  bool poll_in_flight_ = false;
  v1::WorkerLoad load_;          // the last successful poll (all zero before one), less its filter
  uint64_t start_id_ = 0;        // load_.start_id as of the poll before
  int64_t reserved_blocks_ = 0;  // placed here and not yet visible in a poll
  int64_t placed_ = 0;           // requests placed here and not yet visible in a poll
  uint64_t polls_sent_ = 0;      // numbers the polls
  // Placements released (first response or end) after poll number `poll` was sent: dropped
  // from reserved_blocks_, placed_ and pending_hashes_ when a later poll succeeds.
  struct Releasing {
    uint64_t poll = 0;
    int64_t blocks = 0;
    std::vector<uint64_t> hashes;
  };
  std::vector<Releasing> releasing_;
  // For each request whose call here ended (its sequences have left the worker), the number of
  // the last poll sent then: that poll may still count it. Dropped when a later poll succeeds.
  std::vector<uint64_t> ended_;
  // The worker's prefix cache as of its last poll, and the version it was at.
  PrefixFilterView filter_;
  uint64_t filter_version_ = 0;
  // Block hashes of placed prompts not yet visible in filter_, with multiplicity.
  absl::flat_hash_map<uint64_t, int32_t> pending_hashes_;
  // Bumped by ReportUnavailable: a poll sent before the failure cannot make the worker ready.
  uint64_t failures_ = 0;
  // polls_sent_ when SetAdapters last ran: polls sent until then keep its list.
  uint64_t adapters_set_at_ = 0;
};

class WorkerPool final : public Placer {
 public:
  enum class Policy { kPrefixAware, kMostFreeBlocks };

  // Returns "ip:port" for each address of host, an empty list when the name does not exist, an
  // error when the lookup failed (the pool then keeps its workers).
  using Resolver = std::function<absl::StatusOr<std::vector<std::string>>(const std::string& host,
                                                                          const std::string& port)>;

  struct Options {
    std::vector<std::string> addresses;  // static workers, "host:port"
    std::string dns_target;              // "name:port"; empty: no DNS discovery
    absl::Duration dns_interval = absl::Seconds(5);
    absl::Duration poll_timeout = absl::Milliseconds(500);
    int64_t default_block_size = 16;  // until a worker reports its own
    Resolver resolver;                // null: getaddrinfo
    WorkerSecurity security;
    Policy policy = Policy::kPrefixAware;
    int64_t balance_abs = 8;   // requests; see the file comment
    double balance_rel = 1.5;  // see the file comment
    // Collect adapter replays (TakeAdapterReplays): the router serves runtime LoRA updating.
    bool replay_runtime_adapters = false;
  };

  // Adapters loaded at run time on every other ready worker (WorkerLoad.runtime_lora_adapters:
  // same name, same path) that `worker`, just ready, does not serve: what the router loads on
  // it, so that a worker that joins or restarts serves what the fleet serves.
  struct AdapterReplay {
    std::shared_ptr<WorkerEndpoint> worker;
    std::vector<v1::LoadLoraAdapterRequest> adapters;
  };

  struct Stats {
    int known = 0;       // workers in the pool
    int ready = 0;       // of them ready (and not draining)
    int mismatched = 0;  // answering polls, but serving another model
    // The smallest limits among ready workers (0 when none is ready or none reports them).
    int32_t max_model_len = 0;
    int32_t max_parallel_samples = 0;
  };

  // Starts DNS discovery (a thread) when configured. InvalidArgument for a malformed
  // dns_target or no worker source at all.
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Create(Options options,
                                                            std::function<void()> on_change);
  // Stops discovery and waits for polls in flight (at most poll_timeout).
  ~WorkerPool() override;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // The fingerprint (ModelInfo.model_fingerprint) workers must report to be ready; empty (the
  // start) accepts any. Takes effect at each worker's next poll.
  void SetModelFingerprint(std::string fingerprint);

  // Starts a GetLoad on every worker that has none in flight. Returns at once.
  void PollAll();
  // Resolves the DNS target once and adds/drops workers (the discovery thread's step).
  void ResolveNow();

  // Placer: see the file comment. Rejects with Unavailable when no ready worker (other than
  // ticket.avoid) exists, and with OutOfRange when the request needs more blocks than
  // any ready worker has in total.
  Decision Place(const AdmissionTicket& ticket, Placement* placement, absl::Status* error) override;
  // The request placed with `placement` produced its first response or ended: its blocks now
  // show in the worker's own load. Call once per placement.
  void Release(const Placement& placement);
  // The call of a request placed on `worker` ended (done, failed or cancelled): until a poll
  // sent after now comes back, the worker has room for one more request than its last poll
  // says. Wakes the queue (on_change). Call once per ended call.
  void Ended(WorkerEndpoint* worker);
  // A call to `worker` failed with UNAVAILABLE: not used until a poll succeeds.
  void ReportUnavailable(WorkerEndpoint* worker);

  // All workers, ready ones first, then those serving another model (for fetching the model's
  // description).
  [[nodiscard]] std::vector<std::shared_ptr<WorkerEndpoint>> Endpoints() const;
  // The ready workers.
  [[nodiscard]] std::vector<std::shared_ptr<WorkerEndpoint>> ReadyEndpoints() const;
  // The LoRA adapters some ready worker serves, each once, in the order the workers list them.
  [[nodiscard]] std::vector<std::string> ServedAdapters() const;
  // `worker` serves `adapters` now (the answer to a change the router asked for).
  void SetAdapters(WorkerEndpoint* worker, std::vector<std::string> adapters);
  // The replays found since the last call (Options::replay_runtime_adapters): one for each
  // worker that became ready lacking adapters the other ready workers all loaded at run time.
  // Call from on_change.
  [[nodiscard]] std::vector<AdapterReplay> TakeAdapterReplays();
  [[nodiscard]] Stats GetStats() const;

 private:
  struct PollCall;

  WorkerPool(Options options, std::function<void()> on_change);
  void AddLocked(const std::string& address, bool from_dns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnPollDone(PollCall* call, const grpc::Status& status);
  // Takes the poll's prefix filter (if sent) out of `load` into w.
  void UpdateFilterLocked(WorkerEndpoint& w, v1::WorkerLoad& load)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the replay `worker` (just ready) is due, if any (see AdapterReplay).
  void FindReplayLocked(const std::shared_ptr<WorkerEndpoint>& worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DnsLoop();

  const Options options_;
  const std::function<void()> on_change_;
  std::string dns_host_, dns_port_;

  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<WorkerEndpoint>> workers_ ABSL_GUARDED_BY(mu_);
  std::string fingerprint_ ABSL_GUARDED_BY(mu_);
  int polls_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<AdapterReplay> replays_ ABSL_GUARDED_BY(mu_);

  absl::Notification stop_;
  std::thread dns_thread_;
};

// The default Resolver: getaddrinfo.
absl::StatusOr<std::vector<std::string>> ResolveHost(const std::string& host,
                                                     const std::string& port);

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_WORKER_POOL_H_
