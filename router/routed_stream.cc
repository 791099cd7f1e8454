// Invariants (under mu_):
// - finished_ is set once, when no worker call is active, the request is not queued and no
//   write is outstanding; Finish follows outside the lock.
// - reserved_ is true from a placement until the first worker message or the call's end, and
//   the reservation is then released exactly once.
// - 0 <= count_ <= kSlots; a read is started only into a free slot and only while count_ <
//   kSlots; a write is started for slots_[head_] only when count_ > 0 and none is outstanding.
// - Once client_gone_, nothing more is written (count_ stays 0) and any worker call is being
//   cancelled.
// - hold_ (a gRPC hold on the worker call) is set from the call's start until no read can be
//   started any more (its stream ended, or the call is being cancelled): reads paused by a full
//   ring are resumed from OnWriteDone, which is not one of the call's reactions.
#include "router/routed_stream.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/api/proto_convert.h"
#include "common/logging.h"
#include "common/prefix_cache/block_hash.h"
#include "router/request_validator.h"

namespace pagellm {
namespace {

// Attempts per request: the first and one retry on another worker.
constexpr int kMaxAttempts = 2;

// Unique ids for the router's requests: a per-process random prefix and a counter.
uint64_t NextSequence() {
  static std::atomic<uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

const std::string& ProcessPrefix() {
  static const std::string prefix = absl::StrFormat("%08x", std::random_device{}());
  return prefix;
}

std::string NewRequestId(uint64_t seq) { return absl::StrCat("rtr-", ProcessPrefix(), "-", seq); }

bool HasTokens(const v1::GenerateResponse& m) {
  for (const v1::SampleDelta& d : m.deltas()) {
    if (d.token_ids_size() > 0) return true;
  }
  return false;
}

// A worker ends a sample with reason ABORT only when the stream fails (its engine failed, it
// stopped): the stream's status says so, and the sample may yet go on elsewhere. So a stream of
// samples drops that reason, and the delta when nothing else is in it (it never has tokens).
void DropAbortedDeltas(v1::GenerateResponse* m) {
  auto* deltas = m->mutable_deltas();
  int kept = 0;
  for (int i = 0; i < deltas->size(); ++i) {
    v1::SampleDelta* d = deltas->Mutable(i);
    if (d->finish_reason() == v1::FINISH_REASON_ABORT) {
      d->clear_finish_reason();
      if (d->token_ids_size() == 0 && d->text().empty() && d->logprobs_size() == 0) continue;
    }
    if (kept != i) deltas->SwapElements(kept, i);
    ++kept;
  }
  deltas->DeleteSubrange(kept, deltas->size() - kept);
}

}  // namespace

class RoutedStream::WorkerCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  explicit WorkerCall(RoutedStream* owner) : owner_(owner) {}
  void OnReadDone(bool ok) override { owner_->OnWorkerRead(ok); }
  // The owner may delete this call: nothing may follow.
  void OnDone(const grpc::Status& status) override { owner_->OnWorkerDone(status); }

  grpc::ClientContext context;

 private:
  RoutedStream* const owner_;
};

RoutedStream::RoutedStream(const Deps& deps, const ModelContext& model,
                           const v1::GenerateRequest& request, absl::Time client_deadline,
                           Client* client)
    : deps_(deps), client_(client), arrival_(absl::Now()) {
  deps_.metrics->StreamOpened();
  const uint64_t seq = NextSequence();
  client_request_id_ = request.request_id().empty() ? NewRequestId(seq) : request.request_id();

  absl::StatusOr<ValidatedRequest> valid = ValidateGenerateRequest(request, model);
  absl::MutexLock lock(&mu_);
  if (!valid.ok()) {
    outcome_ = valid.status();
  } else if (valid->params.priority != 0 && !deps_.queue->by_priority()) {
    outcome_ = absl::InvalidArgumentError(
        absl::StrCat("priority ", valid->params.priority,
                     " needs priority scheduling: this router runs --scheduling-policy fcfs"));
  } else {
    // The worker sees a router-unique id (clients may reuse theirs); replies get the client's.
    worker_request_.set_request_id(absl::StrCat(client_request_id_, "@", ProcessPrefix(), seq));
    worker_request_.mutable_prompt_token_ids()->Add(valid->prompt_ids.begin(),
                                                    valid->prompt_ids.end());
    *worker_request_.mutable_sampling() = valid->sampling;
    const SamplingParams& params = valid->params;
    resumable_ = !params.UseBeamSearch() && !params.embed;
    return_prompt_ids_ = request.return_prompt_token_ids();
    max_tokens_ = params.max_tokens;
    if (resumable_) samples_.resize(params.n);
    if (resumable_ && !worker_request_.sampling().has_seed()) {
      // As random as the worker's own choice, and the same on the worker that resumes it.
      static thread_local std::mt19937_64 seeds{std::random_device{}()};
      worker_request_.mutable_sampling()->set_seed(seeds());
    }
    deadline_ = client_deadline == absl::InfiniteFuture() ? arrival_ + deps_.request_timeout
                                                          : client_deadline;
    ticket_.prompt_tokens = static_cast<int64_t>(valid->prompt_ids.size());
    ticket_.prompt_ids = std::span<const int32_t>(worker_request_.prompt_token_ids().data(),
                                                  worker_request_.prompt_token_ids().size());
    ticket_.cache_namespace = SaltedCacheNamespace(
        PrefixCacheNamespace(request.sampling().lora_adapter()), request.sampling().cache_salt());
    ticket_.lora_adapter = worker_request_.sampling().lora_adapter();
    ticket_.reuses_cached_prefix = !request.sampling().has_prompt_logprobs();
    ticket_.deadline = deadline_;
    ticket_.priority = valid->params.priority;
  }
}

void RoutedStream::Start() {
  After after;
  {
    absl::MutexLock lock(&mu_);
    PAGELLM_CHECK(!started_, "stream {} started twice", client_request_id_);
    started_ = true;
    if (!outcome_.has_value() && !client_gone_) {
      absl::StatusOr<uint64_t> id = deps_.queue->Push(this, ticket_);
      if (id.ok()) {
        queued_ = true;
        queue_id_ = *id;
        after.pump = true;
        after.queue_changed = true;
      } else {
        outcome_ = id.status();
      }
    }
    MaybeFinishLocked(&after);
  }
  Run(deps_, this, std::move(after));
}

void RoutedStream::OnDispatched(Placement placement) {
  const Deps& deps = deps_;  // `this` may be gone once mu_ is released (see Run)
  After after;
  {
    absl::MutexLock lock(&mu_);
    queued_ = false;
    deps.metrics->CountPlacement(ticket_.prompt_tokens, placement.expected_hit_tokens);
    placement_ = std::move(placement);
    reserved_ = true;
    after.queue_changed = true;
    if (client_gone_) {
      ReleaseLocked(&after);
      MaybeFinishLocked(&after);
    } else {
      StartAttemptLocked();
    }
  }
  Run(deps, this, std::move(after));
}

void RoutedStream::OnRejected(absl::Status status) {
  const Deps& deps = deps_;
  After after;
  {
    absl::MutexLock lock(&mu_);
    queued_ = false;
    after.queue_changed = true;
    if (!outcome_.has_value()) outcome_ = std::move(status);
    MaybeFinishLocked(&after);
  }
  Run(deps, this, std::move(after));
}

void RoutedStream::StartAttemptLocked() {
  ++attempts_;
  read_closed_ = false;
  call_ = std::make_unique<WorkerCall>(this);
  if (deadline_ != absl::InfiniteFuture()) {
    call_->context.set_deadline(absl::ToChronoTime(deadline_));
  }
  placement_.worker->Prepare(&call_->context);
  placement_.worker->stub().async()->Generate(&call_->context, &worker_request_, call_.get());
  call_active_ = true;
  // Reads are restarted from OnWriteDone, outside the call's reactions: the hold keeps gRPC from
  // ending the call (and destroying its reader) while reading is only paused.
  call_->AddHold();
  hold_ = true;
  // A resumed stream may still have the first worker's messages to write: OnWriteDone starts
  // the read once a slot is free.
  if (count_ < kSlots) StartReadLocked();
  call_->StartCall();
}

void RoutedStream::OnWorkerRead(bool ok) {
  const Deps& deps = deps_;
  After after;
  absl::Duration time_to_first_token = absl::InfiniteDuration();
  {
    absl::MutexLock lock(&mu_);
    reading_ = false;
    if (!ok) {
      read_closed_ = true;  // OnWorkerDone follows with the status
      ReleaseHoldLocked();
      return;
    }
    v1::GenerateResponse& msg = slots_[read_slot_];
    if (!got_response_ && return_prompt_ids_ && msg.prompt_token_ids_size() == 0) {
      msg.mutable_prompt_token_ids()->CopyFrom(worker_request_.prompt_token_ids());
    }
    got_response_ = true;
    got_last_ |= msg.finished();
    ReleaseLocked(&after);  // this attempt's reservation, at its first message
    if (resumable_) {
      DropAbortedDeltas(&msg);
      for (const v1::SampleDelta& d : msg.deltas()) {
        if (d.sample_index() < 0 || d.sample_index() >= std::ssize(samples_)) continue;
        Sample& s = samples_[d.sample_index()];
        // Grown geometrically past the first 1,024: n x max_tokens up front would hold memory
        // that most streams never use.
        if (s.tokens.empty()) s.tokens.reserve(std::min(max_tokens_, 1024));
        s.tokens.insert(s.tokens.end(), d.token_ids().begin(), d.token_ids().end());
        if (d.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) s.finished = true;
      }
    }
    if (!got_token_ && HasTokens(msg)) {
      got_token_ = true;
      time_to_first_token = absl::Now() - arrival_;
    }
    if (!client_gone_) {
      msg.set_request_id(client_request_id_);
      ++count_;
      if (!writing_) StartWriteLocked(&after);
      if (count_ < kSlots) StartReadLocked();
    } else {
      ReleaseHoldLocked();  // no more reads: the call is being cancelled
    }
  }
  if (time_to_first_token != absl::InfiniteDuration()) {
    deps.metrics->ObserveTimeToFirstToken(time_to_first_token);
  }
  Run(deps, this, std::move(after));
}

void RoutedStream::StartWriteLocked(After* after) {
  writing_ = true;
  after->write = &slots_[head_];  // stays put while writing_
}

void RoutedStream::OnWriteDone(bool ok) {
  const Deps& deps = deps_;
  After after;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok || client_gone_) {
      // The client is gone (a failed write: Cancel may or may not follow); stop the worker.
      client_gone_ = true;
      count_ = 0;
      CancelCallLocked();
    } else {
      head_ = (head_ + 1) % kSlots;
      --count_;
      if (count_ > 0) StartWriteLocked(&after);
      if (call_active_ && !reading_ && !read_closed_ && count_ < kSlots) StartReadLocked();
    }
    MaybeFinishLocked(&after);
  }
  Run(deps, this, std::move(after));
}

void RoutedStream::OnWorkerDone(const grpc::Status& status) {
  const Deps& deps = deps_;
  After after;
  std::unique_ptr<WorkerCall> done;  // deleted after the lock: we are inside its OnDone
  {
    absl::MutexLock lock(&mu_);
    PAGELLM_CHECK(!hold_, "worker call of {} done while the router held it", client_request_id_);
    done = std::move(call_);
    call_active_ = false;
    reading_ = false;
    ReleaseLocked(&after);
    after.ended = placement_.worker;
    const grpc::StatusCode code = status.error_code();
    if (client_gone_) {
      // Finishes with the cancellation below.
    } else if (status.ok()) {
      outcome_ = absl::OkStatus();
    } else {
      // A call we did not cancel that ends CANCELLED was dropped by the worker (it died or shut
      // down): as unavailable as a broken connection.
      const bool worker_failed =
          code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::CANCELLED;
      if (code == grpc::StatusCode::UNAVAILABLE) after.report_down = placement_.worker;
      const bool whole = got_last_ || (resumable_ && AllSamplesFinishedLocked());
      // After messages: resumed after the tokens the client has (or will have once the ring is
      // written), keeping the work done; otherwise started over only when the client kept them
      // to itself and has them all (none in the ring, none being written).
      const bool resume = got_response_ && resumable_ && CanResumeLocked();
      const bool restart =
          got_response_ && !resume && client_->Restartable() && !writing_ && count_ == 0;
      if (worker_failed && whole) {
        // The client has (or will have, once the ring is written) the whole answer.
        PLOG_WARN("worker {} failed after request {}'s whole answer ({}); finished it",
                  placement_.worker->address(), worker_request_.request_id(),
                  status.error_message());
        if (!got_last_) AddLastMessageLocked(&after);
        outcome_ = absl::OkStatus();
      } else if (worker_failed && (!got_response_ || restart || resume) &&
                 attempts_ < kMaxAttempts) {
        if (restart) {
          client_->Restart();
          got_response_ = false;
          for (Sample& s : samples_) s = Sample();
        } else if (resume) {
          SetResumedLocked();
        }
        deps_.metrics->CountRetry(resume);
        failed_worker_ = placement_.worker;
        ticket_.avoid = failed_worker_.get();
        queue_id_ = deps_.queue->PushFront(this, ticket_);
        queued_ = true;
        after.pump = true;
        after.queue_changed = true;
      } else if (worker_failed) {
        outcome_ = absl::UnavailableError(absl::StrCat(
            "worker ", placement_.worker->address(),
            got_response_ ? " failed during the stream: " : " failed: ", status.error_message()));
      } else {
        outcome_ = FromGrpcStatus(status);
      }
    }
    MaybeFinishLocked(&after);
  }
  done.reset();
  Run(deps, this, std::move(after));
}

bool RoutedStream::CanResumeLocked() const {
  bool has_tokens = false, can_go_on = false;
  for (const Sample& s : samples_) {
    has_tokens |= !s.tokens.empty();
    can_go_on |= !s.finished && std::ssize(s.tokens) < max_tokens_;
  }
  return has_tokens && can_go_on;
}

bool RoutedStream::AllSamplesFinishedLocked() const {
  return !samples_.empty() &&
         std::all_of(samples_.begin(), samples_.end(), [](const Sample& s) { return s.finished; });
}

void RoutedStream::AddLastMessageLocked(After* after) {
  // A new message in a free slot; with none free, the newest one becomes the last (it is not
  // the one being written: that is the oldest, and kSlots > 1).
  const bool full = count_ == kSlots;
  v1::GenerateResponse& last = slots_[(head_ + count_ - (full ? 1 : 0)) % kSlots];
  if (!full) {
    last.Clear();
    last.set_request_id(client_request_id_);
    ++count_;
  }
  last.set_finished(true);
  int64_t completion_tokens = 0;
  for (const Sample& s : samples_) completion_tokens += std::ssize(s.tokens);
  last.mutable_usage()->set_prompt_tokens(worker_request_.prompt_token_ids_size());
  last.mutable_usage()->set_completion_tokens(static_cast<int32_t>(completion_tokens));
  if (!writing_) StartWriteLocked(after);
}

void RoutedStream::SetResumedLocked() {
  // No call reads worker_request_ now. The prompt's logprobs came with the first token.
  worker_request_.mutable_sampling()->clear_prompt_logprobs();
  auto* all = worker_request_.mutable_resumed_output_token_ids();
  all->Clear();
  worker_request_.clear_resumed_samples();
  int64_t longest = 0;  // of the samples that go on
  for (const Sample& s : samples_) {
    // Back to back for several samples: a worker that predates resumed_samples refuses them.
    all->Add(s.tokens.begin(), s.tokens.end());
    const bool finished = s.finished || std::ssize(s.tokens) >= max_tokens_;
    if (!finished) longest = std::max<int64_t>(longest, std::ssize(s.tokens));
    if (samples_.size() > 1) {
      v1::ResumedSample* r = worker_request_.add_resumed_samples();
      r->mutable_token_ids()->Assign(s.tokens.begin(), s.tokens.end());
      r->set_finished(finished);
    }
  }
  // The next worker computes them too: placement counts the blocks of the longest sample that
  // goes on (there, each runs as a group of its own and must fit alone).
  ticket_.prompt_tokens = worker_request_.prompt_token_ids_size() + longest;
}

void RoutedStream::Cancel() {
  const Deps& deps = deps_;
  After after;
  {
    absl::MutexLock lock(&mu_);
    client_gone_ = true;
    count_ = 0;
    if (queued_ && deps_.queue->Remove(queue_id_)) {
      queued_ = false;
      after.queue_changed = true;
      after.pump = true;  // the head may have changed
    }
    CancelCallLocked();
    MaybeFinishLocked(&after);
  }
  Run(deps, this, std::move(after));
}

void RoutedStream::StartReadLocked() {
  reading_ = true;
  read_slot_ = (head_ + count_) % kSlots;
  call_->StartRead(&slots_[read_slot_]);
}

void RoutedStream::CancelCallLocked() {
  if (!call_active_) return;
  call_->context.TryCancel();
  // A read in flight still completes (and releases the hold); a paused one will never restart.
  if (!reading_) ReleaseHoldLocked();
}

void RoutedStream::ReleaseHoldLocked() {
  if (!hold_) return;
  hold_ = false;
  call_->RemoveHold();  // may let the call end: OnDone is then scheduled, never run inline
}

RoutedStream::~RoutedStream() {
  deps_.metrics->StreamClosed();
  // Last: `deps_.on_done` may let the service (and deps_) go away once it returns.
  if (deps_.on_done) deps_.on_done();
}

void RoutedStream::ReleaseLocked(After* after) {
  if (!reserved_) return;
  reserved_ = false;
  after->release = placement_;
}

void RoutedStream::MaybeFinishLocked(After* after) {
  if (!started_ || finished_ || queued_ || call_active_ || writing_) return;
  absl::Status status;
  if (client_gone_) {
    status = CancelStatus();
  } else if (outcome_.has_value() && count_ == 0) {
    status = *outcome_;
  } else {
    return;
  }
  finished_ = true;
  after->finish = std::move(status);
}

absl::Status RoutedStream::CancelStatus() const {
  if (absl::Now() >= deadline_) return absl::DeadlineExceededError("deadline exceeded");
  return absl::CancelledError("cancelled by the client");
}

void RoutedStream::Run(const Deps& deps, RoutedStream* self, After after) {
  if (after.report_down != nullptr) deps.pool->ReportUnavailable(after.report_down.get());
  if (after.release.has_value()) deps.pool->Release(*after.release);
  if (after.ended != nullptr) deps.pool->Ended(after.ended.get());
  if (after.pump) deps.queue->Pump(*deps.pool);
  if (after.queue_changed) deps.metrics->SetQueueLength(static_cast<double>(deps.queue->size()));
  if (after.write != nullptr) {
    // Alive: it cannot finish while this write is outstanding. A write done at once goes on
    // as OnWriteDone would (at most kSlots deep: reads never complete inline).
    if (self->client_->StartWrite(*after.write)) self->OnWriteDone(true);
    return;  // no finish with a write outstanding
  }
  if (after.finish.has_value()) {
    // Alive: it cannot be done before this Finish, which only this call makes.
    deps.metrics->CountRequest(static_cast<grpc::StatusCode>(after.finish->code()));
    self->client_->Finish(*after.finish);  // last: the client may destroy it right away
  }
}

}  // namespace pagellm
