// The engine thread: wait for work -> admit submitted requests (Engine::AddRequest; a rejection
// goes straight to the sink) -> apply cancellations (Engine::Abort frees the blocks at once) ->
// one Engine::Step -> hand outputs to sinks, finish requests the engine no longer holds ->
// publish the load snapshot and metrics. A cancellation therefore takes effect within one step.
#include "worker/server/engine_loop.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "worker/engine/structured_outputs.h"

namespace pagellm {
namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::unique_ptr<EngineLoop> EngineLoop::Start(std::unique_ptr<Engine> engine, Options options) {
  std::unique_ptr<EngineLoop> loop(new EngineLoop(std::move(engine), std::move(options)));
  loop->PublishLoad();
  loop->thread_ = std::thread([l = loop.get()] { l->Run(); });
  return loop;
}

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine, Options options)
    : engine_(std::move(engine)),
      block_size_(options.block_size),
      metrics_(options.metrics),
      clock_(options.clock ? std::move(options.clock) : std::function<double()>(SteadySeconds)),
      served_adapters_(engine_->served_adapters()) {}

EngineLoop::~EngineLoop() { Stop(); }

absl::Status EngineLoop::Submit(std::string id, std::vector<int32_t> prompt_ids,
                                SamplingParams params, std::shared_ptr<RequestSink> sink,
                                ResumedOutput resumed) {
  // The grammar, off the engine thread (a size the engine would refuse is left to it).
  std::optional<structured::Grammar> grammar;
  if (params.structured_output.enabled() && params.structured_output.Validate().ok()) {
    absl::StatusOr<structured::Grammar> built = grammars_.Build(params.structured_output);
    if (!built.ok()) {
      if (metrics_ != nullptr) metrics_->finished_error->Increment();
      return built.status();
    }
    grammar = *std::move(built);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_ || draining_) return absl::UnavailableError("the worker is shutting down");
  inbox_.push_back({std::move(id), std::move(prompt_ids), std::move(params), std::move(grammar),
                    std::move(sink), clock_(), std::move(resumed)});
  ++load_.waiting;
  ++load_.active;
  cv_.notify_one();
  return absl::OkStatus();
}

void EngineLoop::Cancel(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancels_.push_back(id);
  cv_.notify_one();
}

void EngineLoop::SetDraining() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
  load_.draining = true;
}

bool EngineLoop::WaitUntilIdle(double timeout_seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::duration<double>(timeout_seconds),
                           [this] { return load_.active == 0; });
}

void EngineLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    draining_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::ChangeAdapters(AdapterChange change, AdapterDone done) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) {
    const std::vector<std::string> served = served_adapters_;
    lock.unlock();
    done(absl::UnavailableError("the worker is shutting down"), served);
    return;
  }
  adapter_changes_.push_back({std::move(change), std::move(done)});
  cv_.notify_one();
}

std::vector<std::string> EngineLoop::served_adapters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return served_adapters_;
}

void EngineLoop::ApplyAdapterChanges(std::vector<PendingChange>* changes) {
  for (PendingChange& c : *changes) {
    const absl::Status st = c.change.load != nullptr
                                ? engine_->LoadAdapter(std::move(c.change.load))
                                : engine_->UnloadAdapter(c.change.unload);
    std::vector<std::string> served = engine_->served_adapters();
    {
      std::lock_guard<std::mutex> lock(mu_);
      served_adapters_ = served;
    }
    c.done(st, served);
  }
  changes->clear();
}

void EngineLoop::SetAdapterReader(AdapterReader reader) {
  std::lock_guard<std::mutex> lock(mu_);
  reader_ = std::move(reader);
  reader_news_ = true;
  cv_.notify_one();
}

void EngineLoop::ReadAdapter(int32_t id, uint64_t ticket, const LoraModuleSpec& spec) {
  AdapterReadDone done = [this, id,
                          ticket](absl::StatusOr<std::shared_ptr<const LoraAdapter>> result) {
    std::lock_guard<std::mutex> lock(mu_);
    finished_reads_.push_back({id, ticket, std::move(result)});
    cv_.notify_one();
  };
  // Called under mu_: once SetAdapterReader has replaced a reader, the old one is not running.
  std::unique_lock<std::mutex> lock(mu_);
  if (reader_) {
    reader_(spec, std::move(done));
    return;
  }
  lock.unlock();
  done(absl::FailedPreconditionError("this worker reads no LoRA adapter again"));
}

void EngineLoop::ApplyFinishedReads(std::vector<FinishedRead>* reads) {
  std::vector<std::string> failed;
  for (FinishedRead& r : *reads) {
    failed.clear();
    const absl::Status st = r.result.status();
    engine_->AdapterRead(r.id, r.ticket, std::move(r.result), &failed);
    for (const std::string& id : failed) {
      Finish(id,
             // INTERNAL, not UNAVAILABLE: a router takes an unavailable worker out of use.
             absl::InternalError(absl::StrCat(
                 "the LoRA adapter could not be read again from its directory: ", st.message())),
             FinishReason::kAbort);
    }
  }
  reads->clear();
}

EngineLoad EngineLoop::load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return load_;
}

void EngineLoop::Run() {
  std::vector<Pending> pending;
  std::vector<std::string> cancels;
  std::vector<PendingChange> changes;
  std::vector<FinishedRead> reads;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] {
        return stop_ || !inbox_.empty() || !cancels_.empty() || !adapter_changes_.empty() ||
               !finished_reads_.empty() || reader_news_ || engine_->HasUnfinished();
      });
      if (stop_) break;
      pending.swap(inbox_);
      cancels.swap(cancels_);
      changes.swap(adapter_changes_);
      reads.swap(finished_reads_);
      if (reader_news_) {  // before the changes queued after it
        reader_news_ = false;
        engine_->set_adapter_reader(
            [this](int32_t id, uint64_t ticket, const LoraModuleSpec& spec) {
              ReadAdapter(id, ticket, spec);
            });
      }
    }
    ApplyFinishedReads(&reads);
    ApplyAdapterChanges(&changes);  // before the requests submitted after them
    AdmitPending(&pending);
    ApplyCancels(&cancels);
    if (engine_->HasUnfinished()) {
      StepOnce();  // publishes the step's load before its outputs go out
    } else {
      PublishLoad();
    }
  }
  // Shutting down: whatever is left ends as cancelled.
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(inbox_);
    changes.swap(adapter_changes_);
  }
  for (PendingChange& c : changes) {
    c.done(absl::UnavailableError("the worker is shutting down"), engine_->served_adapters());
  }
  for (Pending& p : pending) p.sink->OnDone(absl::CancelledError("the worker stopped"), 0, 0);
  std::vector<std::string> ids;
  for (const auto& [id, a] : active_) ids.push_back(id);
  for (const std::string& id : ids) {
    (void)engine_->Abort(id);
    Finish(id, absl::CancelledError("the worker stopped"), FinishReason::kAbort);
  }
  PublishLoad();
}

void EngineLoop::AdmitPending(std::vector<Pending>* pending) {
  for (Pending& p : *pending) {
    absl::Status st;
    if (active_.contains(p.id)) {
      st = absl::AlreadyExistsError(absl::StrCat("request id '", p.id, "' is in use"));
    } else {
      const int64_t prompt_tokens = static_cast<int64_t>(p.prompt_ids.size());
      st = engine_->AddRequest(p.id, std::move(p.prompt_ids), p.params, std::move(p.grammar),
                               p.resumed);
      if (st.ok()) {
        // The engine admitted the name: it is a served adapter (a label set bounded by the
        // operator's loads, not by clients).
        if (metrics_ != nullptr && !p.params.lora_adapter.empty()) {
          metrics_->lora_requests->Add({{"adapter", p.params.lora_adapter}}).Increment();
        }
        const int64_t resumed = p.resumed.tokens();
        active_.emplace(p.id, Active{.sink = std::move(p.sink),
                                     .prompt_tokens = prompt_tokens,
                                     .completion_tokens = resumed,
                                     .resumed_tokens = resumed,
                                     .n = p.params.embed ? 0 : p.params.n,
                                     .max_tokens = p.params.max_tokens,
                                     .submit_time = p.submit_time,
                                     .scheduled_time = 0,
                                     .first_output_time = 0,
                                     .last_output_time = 0,
                                     .queued = true,
                                     .error = absl::OkStatus()});
        continue;
      }
    }
    if (metrics_ != nullptr) metrics_->finished_error->Increment();
    p.sink->OnDone(st, 0, 0);
  }
  pending->clear();
}

void EngineLoop::ApplyCancels(std::vector<std::string>* cancels) {
  for (const std::string& id : *cancels) {
    if (!active_.contains(id)) continue;
    (void)engine_->Abort(id);
    Finish(id, absl::CancelledError("the request was cancelled"), FinishReason::kAbort);
  }
  cancels->clear();
}

void EngineLoop::StepOnce() {
  outputs_.clear();
  const double step_start = clock_();  // when this step's scheduling happens
  const absl::Status step = engine_->Step(&outputs_);
  const double now = clock_();
  if (!step.ok()) PLOG_ERROR("engine step failed: {}", step.ToString());
  PublishLoad();  // before any sink hears of the step (see the header)
  // Outputs of one request are adjacent; hand each request its span.
  for (size_t i = 0; i < outputs_.size();) {
    size_t j = i + 1;
    while (j < outputs_.size() && outputs_[j].request_id == outputs_[i].request_id) ++j;
    auto it = active_.find(outputs_[i].request_id);
    if (it != active_.end()) {
      Active& a = it->second;
      int64_t tokens = 0;
      for (size_t k = i; k < j; ++k) {
        tokens += static_cast<int64_t>(outputs_[k].new_token_ids.size());
        if (a.error.ok() && !outputs_[k].error.ok()) {
          a.error = absl::Status(outputs_[k].error.code(),
                                 absl::StrCat("sampling failed: ", outputs_[k].error.message()));
        }
      }
      a.completion_tokens += tokens;
      // Outputs in the step that first scheduled it (a one-step prefill, or a request that
      // ends at once): the loop below would not see it again.
      if (a.queued) MarkScheduled(a, step_start);
      if (metrics_ != nullptr && tokens > 0) {
        if (a.last_output_time == 0) {
          metrics_->time_to_first_token->Observe(now - a.submit_time);
        } else {
          metrics_->inter_token_latency->Observe(now - a.last_output_time);
        }
      }
      if (tokens > 0) {
        if (a.first_output_time == 0) a.first_output_time = now;
        a.last_output_time = now;
      }
      a.sink->OnOutputs(std::span<const SequenceOutput>(outputs_.data() + i, j - i));
      if (!engine_->RequestState(it->first).has_value()) {
        // The engine let go of it: finished normally, or failed with the step.
        FinishReason reason = FinishReason::kStop;
        absl::Status st = a.error;
        for (size_t k = i; k < j; ++k) {
          if (outputs_[k].finish_reason == FinishReason::kAbort)
            reason = FinishReason::kAbort;
          else if (outputs_[k].finish_reason == FinishReason::kLength &&
                   reason != FinishReason::kAbort)
            reason = FinishReason::kLength;
        }
        if (st.ok() && reason == FinishReason::kAbort && !step.ok()) {
          // A lost device or tensor-parallel rank is UNAVAILABLE, as gRPC means it: another
          // worker may serve the request. Anything else is the engine's fault.
          st = absl::Status(absl::IsUnavailable(step) ? absl::StatusCode::kUnavailable
                                                      : absl::StatusCode::kInternal,
                            absl::StrCat("the engine failed: ", step.message()));
        }
        Finish(std::string(it->first), st, reason);
      }
    }
    i = j;
  }
  // Queue time: from arrival to the start of the first step that scheduled the request (as vLLM
  // measures it), not to the end of that step (which is time to first token).
  if (metrics_ != nullptr) {
    for (auto& [id, a] : active_) {
      if (!a.queued) continue;
      const std::optional<GroupState> state = engine_->RequestState(id);
      if (state.has_value() && *state != GroupState::kWaiting) MarkScheduled(a, step_start);
    }
  }
  // The requests that finished in this step have left active_.
  std::lock_guard<std::mutex> lock(mu_);
  SetActiveLocked();
}

void EngineLoop::MarkScheduled(Active& a, double step_start) {
  a.queued = false;
  a.scheduled_time = step_start;
  if (metrics_ != nullptr) metrics_->queue_time->Observe(step_start - a.submit_time);
}

void EngineLoop::ObserveFinished(const Active& a, double now) {
  WorkerMetrics& m = *metrics_;
  m.e2e_request_latency->Observe(now - a.submit_time);
  if (a.n == 0) return;  // an embedding: no generation
  const int64_t generated = a.completion_tokens - a.resumed_tokens;
  m.request_prompt_tokens->Observe(static_cast<double>(a.prompt_tokens));
  m.request_generation_tokens->Observe(static_cast<double>(generated));
  m.request_params_n->Observe(a.n);
  m.request_params_max_tokens->Observe(a.max_tokens);
  if (a.first_output_time == 0 || a.queued) return;  // nothing generated here
  const double decode = a.last_output_time - a.first_output_time;
  m.request_prefill_time->Observe(a.first_output_time - a.scheduled_time);
  m.request_decode_time->Observe(decode);
  m.request_inference_time->Observe(a.last_output_time - a.scheduled_time);
  // Tokens after the first, over all samples: n samples decode side by side.
  const int64_t after_first = generated - a.n;
  if (after_first > 0) {
    m.request_time_per_output_token->Observe(decode * a.n / static_cast<double>(after_first));
  }
}

void EngineLoop::Finish(const std::string& id, const absl::Status& status, FinishReason reason) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  Active a = std::move(it->second);
  active_.erase(it);
  if (metrics_ != nullptr) {
    if (!status.ok() && status.code() != absl::StatusCode::kCancelled) {
      metrics_->finished_error->Increment();
    } else if (reason == FinishReason::kAbort) {
      metrics_->finished_abort->Increment();
    } else if (reason == FinishReason::kLength) {
      metrics_->finished_length->Increment();
    } else {
      metrics_->finished_stop->Increment();
    }
    if (status.ok()) ObserveFinished(a, clock_());
  }
  a.sink->OnDone(status, a.prompt_tokens, a.completion_tokens);
}

void EngineLoop::PublishLoad() {
  const BlockManager::Stats bm = engine_->block_manager().GetStats();
  const EngineStats stats = engine_->stats();
  if (metrics_ != nullptr) {
    const double dev_total = std::max<int64_t>(1, bm.device_used + bm.device_free);
    const double swap_total = bm.swap_used + bm.swap_free;
    metrics_->device.blocks_used->Set(bm.device_used);
    metrics_->device.blocks_capacity->Set(bm.device_used + bm.device_free);
    metrics_->device.usage_ratio->Set(bm.device_used / dev_total);
    metrics_->swap.blocks_used->Set(bm.swap_used);
    metrics_->swap.blocks_capacity->Set(swap_total);
    metrics_->swap.usage_ratio->Set(swap_total > 0 ? bm.swap_used / swap_total : 0.0);
    metrics_->requests_running->Set(engine_->num_running());
    metrics_->requests_swapped->Set(engine_->num_swapped());
    metrics_->preemptions_swap->Increment(stats.preemptions_swap - last_stats_.preemptions_swap);
    metrics_->preemptions_recompute->Increment(stats.preemptions_recompute -
                                               last_stats_.preemptions_recompute);
    metrics_->prompt_tokens->Increment(stats.computed_prompt_tokens -
                                       last_stats_.computed_prompt_tokens);
    metrics_->generation_tokens->Increment(stats.generated_tokens - last_stats_.generated_tokens);
    metrics_->prefix_cache_hit_tokens->Increment(stats.prefix_cache_hit_tokens -
                                                 last_stats_.prefix_cache_hit_tokens);
    metrics_->structured_masks_computed->Increment(stats.structured_masks_computed -
                                                   last_stats_.structured_masks_computed);
    metrics_->structured_masks_cached->Increment(stats.structured_masks_cached -
                                                 last_stats_.structured_masks_cached);
    metrics_->structured_mask_seconds->Increment(stats.structured_mask_seconds -
                                                 last_stats_.structured_mask_seconds);
    metrics_->lora_slot_loads->Increment(stats.lora_slot_loads - last_stats_.lora_slot_loads);
    metrics_->lora_adapter_reads->Increment(stats.lora_adapter_reads -
                                            last_stats_.lora_adapter_reads);
    metrics_->spec_draft_tokens->Increment(stats.spec_draft_tokens - last_stats_.spec_draft_tokens);
    metrics_->spec_accepted_tokens->Increment(stats.spec_accepted_tokens -
                                              last_stats_.spec_accepted_tokens);
    if (stats.steps > last_stats_.steps) {  // one step per PublishLoad after StepOnce
      metrics_->iteration_tokens->Observe(
          static_cast<double>(stats.computed_prompt_tokens - last_stats_.computed_prompt_tokens +
                              stats.generated_tokens - last_stats_.generated_tokens));
    }
    metrics_->tensor_parallel_size->Set(stats.tensor_parallel_size);
    if (stats.tensor_parallel_size > 1 && stats.steps > last_stats_.steps) {
      metrics_->collective_seconds->Observe(stats.collective_seconds -
                                            last_stats_.collective_seconds);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (metrics_ != nullptr) {
    metrics_->requests_waiting->Set(engine_->num_waiting() + static_cast<double>(inbox_.size()));
    metrics_->prefix_cache_queried_tokens->Increment(bm.prefix_cache_queried_tokens -
                                                     queried_tokens_seen_);
  }
  queried_tokens_seen_ = bm.prefix_cache_queried_tokens;
  last_stats_ = stats;
  load_.kv_blocks_total = bm.device_used + bm.device_free;
  load_.kv_blocks_free = bm.device_free;
  load_.swap_blocks_total = bm.swap_used + bm.swap_free;
  load_.swap_blocks_free = bm.swap_free;
  load_.block_size = block_size_;
  load_.running = engine_->num_running();
  load_.waiting = engine_->num_waiting() + static_cast<int64_t>(inbox_.size());
  load_.swapped = engine_->num_swapped();
  load_.max_num_seqs = engine_->max_num_seqs();
  load_.draining = draining_;
  SetActiveLocked();
}

void EngineLoop::SetActiveLocked() {
  load_.active = static_cast<int64_t>(active_.size() + inbox_.size());
  if (load_.active == 0) idle_cv_.notify_all();
}

}  // namespace pagellm
