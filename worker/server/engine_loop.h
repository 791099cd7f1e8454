// EngineLoop: runs an Engine on its own thread and connects it to concurrent callers (the gRPC
// threads). Callers Submit() requests with a RequestSink and may Cancel() them; the engine
// thread adds them, steps the engine, and hands each request's outputs to its sink.
//
// Time comes from Options::clock (steady time by default; tests inject a fake one), and feeds
// the latency histograms: time to first token and end-to-end latency from Submit(), the gap
// between a request's consecutive outputs, and queue time until the first step that schedules
// it -- each read at the end of the step that produced the event.
//
// The load (load()) and the step's metrics are published after each step and before its
// outputs reach the sinks: whoever has seen a response and then polls the load or scrapes the
// metrics sees that step's effect (a router never counts a started request as still waiting).
//
// Threading: Submit, Cancel, ChangeAdapters, SetAdapterReader, SetDraining, WaitUntilIdle,
// load(), served_adapters() and Stop() are thread-safe. Sinks
// are called on the engine thread only and must not block (queue and return). Each submitted
// request gets exactly one OnDone(): OK after its last output, CANCELLED after Cancel(), or the
// error that rejected or failed it. Nothing is logged about a request's content.
#ifndef PAGELLM_WORKER_SERVER_ENGINE_LOOP_H_
#define PAGELLM_WORKER_SERVER_ENGINE_LOOP_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "worker/engine/engine.h"
#include "worker/engine/resumed_output.h"
#include "worker/server/worker_metrics.h"

namespace pagellm {

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // New outputs of this request from one step (one entry per sample that advanced).
  virtual void OnOutputs(std::span<const SequenceOutput> outputs) = 0;
  // The end: `status` OK when the request finished normally. Called exactly once.
  virtual void OnDone(const absl::Status& status, int64_t prompt_tokens,
                      int64_t completion_tokens) = 0;
};

// A consistent snapshot of the engine, published after every step.
struct EngineLoad {
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_free = 0;
  int64_t swap_blocks_total = 0;
  int64_t swap_blocks_free = 0;
  int64_t block_size = 0;
  int64_t running = 0;
  int64_t waiting = 0;  // in the engine's queue or just submitted
  int64_t swapped = 0;
  int64_t max_num_seqs = 0;  // the engine's cap on sequences running at once
  int64_t active = 0;        // submitted and not yet done
  bool draining = false;
};

class EngineLoop {
 public:
  struct Options {
    int64_t block_size = 16;           // reported in load()
    WorkerMetrics* metrics = nullptr;  // borrowed, may be null; must outlive the loop
    // Seconds on a monotonic clock; called from the engine thread and from Submit's callers.
    std::function<double()> clock;  // empty: std::chrono::steady_clock
  };

  // Starts the engine thread. `engine` is owned.
  static std::unique_ptr<EngineLoop> Start(std::unique_ptr<Engine> engine, Options options);
  ~EngineLoop();  // Stop()s
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues a request. UNAVAILABLE while draining or stopped, INVALID_ARGUMENT when its
  // structured output does not compile (sink not called in either case: the grammar is built
  // here, on the caller's thread, so that the engine thread never stalls on a large schema);
  // otherwise OK and the sink hears the outcome (other validation errors too) through OnDone.
  // `id` must be unique among active requests (AlreadyExists through OnDone otherwise).
  // `resumed`: Engine::AddRequest's; the completion tokens OnDone reports count them.
  absl::Status Submit(std::string id, std::vector<int32_t> prompt_ids, SamplingParams params,
                      std::shared_ptr<RequestSink> sink, ResumedOutput resumed = {});
  // Aborts the request at the next step and frees its blocks; its sink gets OnDone(CANCELLED).
  // Unknown or finished ids are ignored.
  void Cancel(const std::string& id);
  // Refuses new requests from now on; running ones continue.
  void SetDraining();
  // Blocks until no request is active (submitted and not done) or `timeout_seconds` of real time
  // pass; returns whether it is idle. Waits on a condition, not by polling.
  bool WaitUntilIdle(double timeout_seconds);
  // Aborts everything still active (CANCELLED) and joins the engine thread. Idempotent.
  void Stop();

  // A LoRA adapter change (Engine::LoadAdapter or UnloadAdapter), applied on the engine thread
  // between steps, before the requests submitted after it. `done` gets the outcome and the
  // adapters served after it; it runs on the engine thread (Unavailable from Stop() when the loop
  // stops first) and must not block.
  struct AdapterChange {
    std::shared_ptr<const LoraAdapter> load;  // non-null: load it
    std::string unload;                       // otherwise: unload the adapter of this name
  };
  using AdapterDone = std::function<void(const absl::Status&, const std::vector<std::string>&)>;
  void ChangeAdapters(AdapterChange change, AdapterDone done);
  // The adapters served as of the last change applied (Engine::served_adapters).
  [[nodiscard]] std::vector<std::string> served_adapters() const;
  // Reads an adapter's directory again for the engine (Engine::AdapterReader), when more
  // adapters are served than host memory holds: it must queue the read and return (it runs
  // with the loop's lock held: it may not call the loop or `done` there), then call `done`
  // once, from any other thread, with the adapter or the error. Without a reader the engine never
  // lets go of an adapter.
  using AdapterReadDone =
      std::function<void(absl::StatusOr<std::shared_ptr<const LoraAdapter>> result)>;
  using AdapterReader = std::function<void(const LoraModuleSpec& spec, AdapterReadDone done)>;
  // Takes effect before the changes queued after it. Requests that waited for a read that
  // failed end with INTERNAL (the worker serves on). `done` must be called
  // before the loop is destroyed.
  void SetAdapterReader(AdapterReader reader);

  [[nodiscard]] EngineLoad load() const;
  // The engine's prefix-cache filter (BlockManager::prefix_filter()); null when prefix caching is
  // off. Lives as long as the loop; its version() and Snapshot() are thread-safe.
  [[nodiscard]] const CountingPrefixFilter* prefix_filter() const {
    return engine_->block_manager().prefix_filter();
  }

 private:
  struct Pending {
    std::string id;
    std::vector<int32_t> prompt_ids;
    SamplingParams params;
    std::optional<structured::Grammar> grammar;  // built by Submit
    std::shared_ptr<RequestSink> sink;
    double submit_time = 0;
    ResumedOutput resumed;
  };
  struct Active {
    std::shared_ptr<RequestSink> sink;
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;  // resumed ones included (what the client is told)
    int64_t resumed_tokens = 0;     // generated elsewhere (WorkerGenerateRequest)
    int32_t n = 1;                  // for the per-request histograms (0: an embedding)
    int32_t max_tokens = 0;
    double submit_time = 0;
    double scheduled_time = 0;     // start of the first step that scheduled it
    double first_output_time = 0;  // 0 until the first output
    double last_output_time = 0;   // 0 until the first output
    bool queued = true;            // not yet scheduled (for the queue-time histogram)
    absl::Status error;            // the first sequence error (SequenceOutput::error); ends it
  };

  EngineLoop(std::unique_ptr<Engine> engine, Options options);
  void Run();
  void AdmitPending(std::vector<Pending>* pending);
  void ApplyCancels(std::vector<std::string>* cancels);
  struct PendingChange {
    AdapterChange change;
    AdapterDone done;
  };
  void ApplyAdapterChanges(std::vector<PendingChange>* changes);
  struct FinishedRead {
    int32_t id = -1;
    uint64_t ticket = 0;
    absl::StatusOr<std::shared_ptr<const LoraAdapter>> result;
  };
  // Engine::AdapterReader: hands the read to reader_ (on the engine thread).
  void ReadAdapter(int32_t id, uint64_t ticket, const LoraModuleSpec& spec);
  void ApplyFinishedReads(std::vector<FinishedRead>* reads);
  void StepOnce();
  // The first step that scheduled `a` started at `step_start` (queue time ends).
  void MarkScheduled(Active& a, double step_start);
  void Finish(const std::string& id, const absl::Status& status, FinishReason reason);
  // The per-request histograms of a request that ended with OK at `now`.
  void ObserveFinished(const Active& a, double now);
  void PublishLoad();
  // load_.active from active_ and the inbox (wakes WaitUntilIdle at 0). REQUIRES: mu_ held.
  void SetActiveLocked();

  std::unique_ptr<Engine> engine_;
  const int64_t block_size_;
  WorkerMetrics* metrics_;
  const std::function<double()> clock_;

  GrammarBuildCache grammars_;  // Submit's, thread-safe
  mutable std::mutex mu_;
  std::condition_variable cv_;                  // the engine thread waits for work
  std::condition_variable idle_cv_;             // WaitUntilIdle waits for load_.active == 0
  std::vector<Pending> inbox_;                  // guarded by mu_
  std::vector<std::string> cancels_;            // guarded by mu_
  std::vector<PendingChange> adapter_changes_;  // guarded by mu_
  std::vector<std::string> served_adapters_;    // guarded by mu_
  AdapterReader reader_;                        // guarded by mu_
  bool reader_news_ = false;                    // guarded by mu_: reader_ is not in the engine
  std::vector<FinishedRead> finished_reads_;    // guarded by mu_
  bool stop_ = false;                           // guarded by mu_
  bool draining_ = false;                       // guarded by mu_
  EngineLoad load_;                             // guarded by mu_

  // Engine-thread state.
  absl::flat_hash_map<std::string, Active> active_;
  std::vector<SequenceOutput> outputs_;
  EngineStats last_stats_;           // for the metrics' counter increments
  int64_t queried_tokens_seen_ = 0;  // likewise
  std::thread thread_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_SERVER_ENGINE_LOOP_H_
