// Drives the engine's Scheduler the way the engine does (scheduler.h's contract):
//   arrivals -> Add(); Schedule(); charge the step (copies, then each scheduled chunk) to the
//   clock; for each chunk that samples, a synthetic token, and a finish once the request has its
//   trace's output length; Update() applies them and hands back the finished requests; idle ->
//   jump to the next arrival.
// Prompts are random token ids, so with prefix caching on nothing would hit anyway.
//
// Invariants checked every step: the memory split adds up to the pool and no category is
// negative; at the end every device and CPU block is free again.
#include "tools/simulate/paged_simulator.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/simulate/cost_model.h"
#include "worker/engine/scheduler.h"
#include "worker/engine/sequence.h"
#include "worker/kv/block_manager.h"

namespace pagellm::sim {
namespace {

class PagedRun {
 public:
  PagedRun(const SimConfig& config, const std::vector<TraceRequest>& trace,
           std::unique_ptr<BlockManager> bm, double request_rate)
      : c_(config),
        trace_(trace),
        bm_(std::move(bm)),
        scheduler_(config.scheduler, bm_.get()),
        cost_(config.model, config.gpu, config.cost),
        rec_("pagellm", request_rate, static_cast<int64_t>(trace.size()), config.pool_tokens(),
             trace.empty() ? 0 : trace.front().arrival_s,
             trace.empty() ? 0 : trace.back().arrival_s),
        rng_(config.seed),
        token_(0, static_cast<int32_t>(config.model.vocab - 1)),
        groups_(trace.size()) {}

  absl::StatusOr<PolicyResult> Run();

 private:
  void AddArrivals();
  // The pool split during the step just scheduled (before Update marks it computed).
  absl::StatusOr<MemorySplit> Split(int64_t scheduled_tokens) const;
  // The step's synthetic tokens and finishes, applied by Scheduler::Update, and retirement of
  // finished requests.
  void Complete(const SchedulerOutput& out);
  absl::Status CheckAllFree() const;

  const SimConfig& c_;
  const std::vector<TraceRequest>& trace_;
  std::unique_ptr<BlockManager> bm_;
  Scheduler scheduler_;
  CostModel cost_;
  MetricsRecorder rec_;
  std::mt19937 rng_;
  std::uniform_int_distribution<int32_t> token_;
  // groups_[i] is request i while the scheduler knows it (group->arrival == i).
  std::vector<std::unique_ptr<SequenceGroup>> groups_;
  std::vector<SequenceGroup*> active_;  // groups added and not yet removed, in any order
  size_t next_ = 0;                     // next trace request to arrive
  int64_t completed_ = 0;
  double clock_ = 0;
  StepResult result_;                     // scratch
  std::vector<SequenceGroup*> finished_;  // scratch
};

void PagedRun::AddArrivals() {
  for (; next_ < trace_.size() && trace_[next_].arrival_s <= clock_; ++next_) {
    const TraceRequest& r = trace_[next_];
    auto group = std::make_unique<SequenceGroup>();
    group->request_id = std::to_string(next_);
    group->arrival = static_cast<int64_t>(next_);
    group->max_seqs = 1;
    auto seq = std::make_unique<Sequence>();
    seq->seq_id = static_cast<int64_t>(next_);
    seq->prompt_len = r.input_len;
    seq->tokens.resize(r.input_len);
    for (int32_t& t : seq->tokens) t = token_(rng_);
    group->seqs.push_back(std::move(seq));
    scheduler_.Add(group.get());
    active_.push_back(group.get());
    groups_[next_] = std::move(group);
  }
}

absl::StatusOr<MemorySplit> PagedRun::Split(int64_t scheduled_tokens) const {
  int64_t allocated = 0;  // token slots the block tables cover
  int64_t computed = 0;
  for (const SequenceGroup* g : active_) {
    if (g->state == GroupState::kWaiting) continue;  // holds no blocks (scheduler.h)
    for (const auto& seq : g->seqs) {
      if (!bm_->HasSequence(seq->seq_id) || bm_->IsSwapped(seq->seq_id)) continue;
      allocated += bm_->NumTokens(seq->seq_id);
      computed += seq->num_computed;
    }
  }
  const int64_t bs = c_.block_size;
  const int64_t free_blocks = bm_->NumFreeDeviceBlocks();
  MemorySplit s;
  s.live = static_cast<double>(computed + scheduled_tokens);
  s.reserved = static_cast<double>(allocated - computed - scheduled_tokens);
  s.internal = static_cast<double>((c_.num_device_blocks - free_blocks) * bs - allocated);
  s.free = static_cast<double>(free_blocks * bs);
  if (s.reserved < 0 || s.internal < 0) {
    return absl::InternalError(absl::StrCat(
        "paged accounting: ", computed, " computed + ", scheduled_tokens,
        " scheduled tokens exceed the ", allocated, " slots of the block tables, or those exceed ",
        c_.num_device_blocks - free_blocks, " used blocks (scheduler/block manager mismatch)"));
  }
  return s;
}

void PagedRun::Complete(const SchedulerOutput& out) {
  for (const ScheduledSeq& s : out.seqs) {
    if (!s.sample) continue;
    result_.appends.push_back({s.seq, token_(rng_)});
    if (s.seq->num_output() + 1 >= trace_[s.group->arrival].output_len) {
      result_.finishes.push_back({s.group, s.seq, /*keep=*/false});
    }
  }
  finished_.clear();
  scheduler_.Update(out, &result_, &finished_);
  for (SequenceGroup* group : finished_) {
    const TraceRequest& r = trace_[group->arrival];
    rec_.RecordFinish(r.arrival_s, clock_, r.output_len);
    ++completed_;
    active_.erase(std::find(active_.begin(), active_.end(), group));
    groups_[group->arrival].reset();
  }
}

absl::Status PagedRun::CheckAllFree() const {
  if (bm_->NumFreeDeviceBlocks() != c_.num_device_blocks ||
      bm_->NumFreeSwapBlocks() != c_.num_swap_blocks) {
    return absl::InternalError(absl::StrCat(
        "after every request finished, ", c_.num_device_blocks - bm_->NumFreeDeviceBlocks(),
        " device and ", c_.num_swap_blocks - bm_->NumFreeSwapBlocks(),
        " swap blocks are still allocated (leak in scheduler or block manager)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PolicyResult> PagedRun::Run() {
  const int64_t n = static_cast<int64_t>(trace_.size());
  clock_ = trace_.empty() ? 0 : trace_.front().arrival_s;
  int idle_steps = 0;
  while (completed_ < n) {
    AddArrivals();
    const SchedulerOutput& out = scheduler_.Schedule();
    StepCost cost;
    int64_t pcie_blocks = 0, device_blocks = 0;
    for (const KvCopy& copy : out.copies) {
      ++(copy.kind == KvCopy::Kind::kDeviceToDevice ? device_blocks : pcie_blocks);
    }
    cost_.AddCopies(&cost, pcie_blocks, device_blocks, c_.block_size);
    if (out.seqs.empty()) {
      clock_ += cost_.Seconds(cost);
      if (next_ < trace_.size()) {
        clock_ = std::max(clock_, trace_[next_].arrival_s);
        idle_steps = 0;
      } else if (++idle_steps > 3) {
        return absl::InternalError(absl::StrCat(
            "no progress: ", scheduler_.num_waiting(), " waiting and ", scheduler_.num_swapped(),
            " swapped requests never fit the pool of ", c_.num_device_blocks, " blocks"));
      }
      continue;
    }
    idle_steps = 0;
    int64_t batched = 0, scheduled_tokens = 0;
    const SequenceGroup* last = nullptr;
    for (const ScheduledSeq& s : out.seqs) {
      cost_.AddSequence(&cost, s.num_tokens, s.seq->num_computed, s.sample);
      scheduled_tokens += s.num_tokens;
      if (s.group != last) ++batched;
      last = s.group;
    }
    absl::StatusOr<MemorySplit> split = Split(scheduled_tokens);
    if (!split.ok()) return split.status();
    const double dt = cost_.Seconds(cost);
    rec_.RecordStep(clock_, dt, batched, *split);
    clock_ += dt;
    Complete(out);
  }
  if (absl::Status s = CheckAllFree(); !s.ok()) return s;
  const SchedulerStats& st = scheduler_.stats();
  rec_.SetPreemptions(st.preemptions_recompute + st.preemptions_swap,
                      st.swapped_out_blocks + st.swapped_in_blocks);
  return rec_.Result();
}

}  // namespace

absl::StatusOr<PolicyResult> SimulatePaged(const SimConfig& config,
                                           const std::vector<TraceRequest>& trace,
                                           double request_rate) {
  BlockManager::Options options;
  options.num_device_blocks = config.num_device_blocks;
  options.num_swap_blocks = config.num_swap_blocks;
  options.block_size = config.block_size;
  options.watermark = config.watermark;
  options.enable_prefix_caching = config.enable_prefix_caching;
  absl::StatusOr<std::unique_ptr<BlockManager>> bm = BlockManager::Create(options);
  if (!bm.ok()) return bm.status();
  PagedRun run(config, trace, std::move(*bm), request_rate);
  return run.Run();
}

}  // namespace pagellm::sim
