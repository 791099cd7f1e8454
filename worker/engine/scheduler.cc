// Invariants:
//   - A group is in exactly one of waiting_ / running_ / swapped_ (or none once removed), and its
//     state says which. Each queue is sorted by rank (Before).
//   - A waiting group's live sequences hold no blocks; a running group's live sequences are
//     device-resident in the block manager; a swapped group's are CPU-resident.
//   - A live sequence in the block manager holds KV slots for a prefix of its tokens: all but the
//     tokens sampled since its last scheduled step, which AppendPendingSlots adds.
//   - Preemption victims are taken from the back of running_ (latest rank), so a group that
//     was already scheduled in this step (earlier in running_) is never a victim.
//   - Every running group ranks before every swapped one: a group is swapped out as the latest
//     running one, and while it is out only groups that rank before it are admitted.
#include "worker/engine/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace pagellm {
namespace {

template <typename Queue>
void Erase(Queue& q, SequenceGroup* g) {
  q.erase(std::remove(q.begin(), q.end(), g), q.end());
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Sequences the group counts against --max-num-seqs: before its fork, the ones it will have.
int64_t SeqsOf(const SequenceGroup* g) {
  return g->forked ? static_cast<int64_t>(g->seqs.size()) : std::max<int64_t>(g->max_seqs, 1);
}

}  // namespace

absl::StatusOr<PreemptionMode> ParsePreemptionMode(const std::string& name) {
  if (name == "auto") return PreemptionMode::kAuto;
  if (name == "recompute") return PreemptionMode::kRecompute;
  if (name == "swap") return PreemptionMode::kSwap;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown preemption mode '", name, "' (auto, recompute, swap)"));
}

absl::StatusOr<SchedulingPolicy> ParseSchedulingPolicy(const std::string& name) {
  if (name == "fcfs") return SchedulingPolicy::kFcfs;
  if (name == "priority") return SchedulingPolicy::kPriority;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown scheduling policy '", name, "' (fcfs, priority)"));
}

Scheduler::Scheduler(const SchedulerOptions& options, BlockManager* block_manager)
    : options_(options), bm_(block_manager) {}

bool Scheduler::Before(const SequenceGroup* a, const SequenceGroup* b) const {
  if (options_.policy == SchedulingPolicy::kPriority && a->params.priority != b->params.priority) {
    return a->params.priority < b->params.priority;
  }
  return a->arrival < b->arrival;
}

template <typename Queue>
void Scheduler::InsertByRank(Queue& q, SequenceGroup* g) {
  q.insert(std::upper_bound(
               q.begin(), q.end(), g,
               [this](const SequenceGroup* a, const SequenceGroup* b) { return Before(a, b); }),
           g);
}

std::vector<int64_t>& Scheduler::SeqIds(const SequenceGroup* group) {
  ids_scratch_.clear();
  for (const auto& seq : group->seqs) ids_scratch_.push_back(seq->seq_id);
  return ids_scratch_;
}

void Scheduler::AddCopies(const std::vector<KvCopy>& copies) {
  out_.copies.insert(out_.copies.end(), copies.begin(), copies.end());
}

void Scheduler::Add(SequenceGroup* group) {
  latest_arrival_ = std::max(latest_arrival_, group->arrival);
  group->state = GroupState::kWaiting;
  InsertByRank(waiting_, group);
}

void Scheduler::FreeBlocks(SequenceGroup* group) {
  for (auto& seq : group->seqs) {
    if (bm_->HasSequence(seq->seq_id)) {
      PAGELLM_CHECK(bm_->Free(seq->seq_id).ok(), "freeing sequence {}", seq->seq_id);
    }
    seq->num_computed = 0;
    seq->draft.clear();
  }
}

void Scheduler::Remove(SequenceGroup* group) {
  FreeBlocks(group);
  Erase(waiting_, group);
  if (group->state == GroupState::kRunning &&
      std::find(running_.begin(), running_.end(), group) != running_.end()) {
    LeaveRunning(group);
  }
  Erase(running_, group);
  Erase(swapped_, group);
}

void Scheduler::FinishSequence(SequenceGroup* group, Sequence* seq, bool keep) {
  auto it = std::find_if(group->seqs.begin(), group->seqs.end(),
                         [seq](const auto& s) { return s.get() == seq; });
  PAGELLM_CHECK(it != group->seqs.end(), "sequence {} is not live in request {}", seq->seq_id,
                group->request_id);
  if (bm_->HasSequence(seq->seq_id)) {
    PAGELLM_CHECK(bm_->Free(seq->seq_id).ok(), "freeing sequence {}", seq->seq_id);
  }
  seq->finished = true;
  std::unique_ptr<Sequence> owned = std::move(*it);
  group->seqs.erase(it);
  if (keep) group->done.push_back(std::move(owned));
}

bool Scheduler::AppendPendingSlots(SequenceGroup* group) {
  for (auto& seq : group->seqs) {
    int64_t have = bm_->NumTokens(seq->seq_id);
    while (have < static_cast<int64_t>(seq->tokens.size())) {
      if (!bm_->AppendSlot(seq->seq_id, seq->tokens[have], &out_.copies).ok()) return false;
      ++have;
    }
  }
  return true;
}

void Scheduler::PreemptByRecompute(SequenceGroup* group) {
  ++stats_.preemptions_recompute;
  FreeBlocks(group);
  Add(group);
}

bool Scheduler::TrySwapOut(SequenceGroup* group) {
  const std::vector<int64_t>& ids = SeqIds(group);
  if (!bm_->CanSwapOut(ids)) return false;
  absl::StatusOr<std::vector<KvCopy>> copies = bm_->SwapOut(ids);
  PAGELLM_CHECK(copies.ok(), "swap-out failed after a capacity check: {}",
                copies.status().ToString());
  AddCopies(*copies);
  for (auto& seq : group->seqs) seq->draft.clear();
  stats_.swapped_out_blocks += static_cast<int64_t>(copies->size());
  ++stats_.preemptions_swap;
  group->state = GroupState::kSwapped;
  InsertByRank(swapped_, group);
  return true;
}

SequenceGroup* Scheduler::PreemptLatest() {
  SequenceGroup* victim = running_.back();
  running_.pop_back();
  LeaveRunning(victim);
  bool swap = false;
  switch (options_.preemption_mode) {
    case PreemptionMode::kRecompute:
      swap = false;
      break;
    case PreemptionMode::kSwap:
      swap = true;
      break;
    case PreemptionMode::kAuto:
      swap = victim->seqs.size() > 1;
      break;
  }
  if (swap && TrySwapOut(victim)) return victim;
  if (swap) ++stats_.swap_fallbacks;
  PreemptByRecompute(victim);
  return victim;
}

void Scheduler::ScheduleGroup(SequenceGroup* group, int64_t* budget) {
  int64_t total = 0;
  for (const auto& seq : group->seqs) total += seq->num_uncomputed();
  // Several sequences advance in lockstep (a beam step needs every beam's logits at once): the
  // group samples only in a step that finishes all of them; otherwise each one computes at most
  // up to its last token.
  const bool all = group->seqs.size() == 1 || total <= *budget;
  const bool scoring = group->ScoresPrompt();  // one sequence: it has not forked
  for (auto& seq : group->seqs) {
    int64_t want = all ? seq->num_uncomputed() : seq->num_uncomputed() - 1;
    // The cap applies to single sequences only: a group's sequences must finish together.
    if (prefill_cap_ > 0 && group->seqs.size() == 1) want = std::min(want, prefill_cap_);
    if (scoring) want = std::min(want, scored_budget_);
    const int64_t n = std::min(want, *budget);
    if (n <= 0) continue;
    if (scoring) scored_budget_ -= n;
    out_.seqs.push_back(
        {group, seq.get(), n, seq->num_computed + n == static_cast<int64_t>(seq->tokens.size())});
    *budget -= n;
  }
}

bool Scheduler::TrySwapIn(SequenceGroup* group, int64_t* budget, int64_t* num_seqs) {
  if (*num_seqs + SeqsOf(group) > options_.max_num_seqs) return false;
  const std::vector<int64_t>& ids = SeqIds(group);
  if (!bm_->CanSwapIn(ids)) return false;
  absl::StatusOr<std::vector<KvCopy>> copies = bm_->SwapIn(ids);
  PAGELLM_CHECK(copies.ok(), "swap-in failed after a capacity check: {}",
                copies.status().ToString());
  AddCopies(*copies);
  stats_.swapped_in_blocks += static_cast<int64_t>(copies->size());
  Erase(swapped_, group);
  group->state = GroupState::kRunning;
  InsertByRank(running_, group);
  EnterRunning(group);
  if (!AppendPendingSlots(group)) {
    // The watermark was not enough for its pending tokens; it is the latest running group
    // (groups that rank after it are not admitted while it is out), so it goes back out.
    PAGELLM_CHECK(running_.back() == group, "a swapped-in group is not the latest running one");
    PreemptLatest();
    return false;
  }
  *num_seqs += SeqsOf(group);
  ScheduleGroup(group, budget);
  return true;
}

bool Scheduler::AdapterMayRun(const SequenceGroup* group, const SequenceGroup* blocked) const {
  if (!group->adapter_swaps) return true;
  if (running_adapters_.contains(group->adapter)) {
    return blocked == nullptr || group->arrival <= blocked->lora_pass_limit;
  }
  return blocked == nullptr && static_cast<int64_t>(running_adapters_.size()) < options_.lora_slots;
}

void Scheduler::EnterRunning(SequenceGroup* group) {
  if (group->adapter_swaps) ++running_adapters_[group->adapter];
}

void Scheduler::LeaveRunning(const SequenceGroup* group) {
  if (!group->adapter_swaps) return;
  auto it = running_adapters_.find(group->adapter);
  PAGELLM_CHECK(it != running_adapters_.end() && it->second > 0,
                "request {} leaves running with its adapter uncounted", group->request_id);
  if (--it->second == 0) running_adapters_.erase(it);
}

bool Scheduler::TryAdmit(size_t index, int64_t* budget, int64_t* num_seqs) {
  SequenceGroup* group = waiting_[index];
  if (*num_seqs + SeqsOf(group) > options_.max_num_seqs) return false;
  const int64_t bs = bm_->block_size();
  int64_t blocks = 0;
  for (const auto& seq : group->seqs)
    blocks += CeilDiv(static_cast<int64_t>(seq->tokens.size()), bs);
  if (!bm_->CanAllocateBlocks(blocks)) return false;
  for (auto& seq : group->seqs) {
    absl::StatusOr<int64_t> hit =
        bm_->Allocate(seq->seq_id, seq->tokens, /*reuse_cached_prefix=*/!group->ScoresPrompt(),
                      group->cache_namespace);
    PAGELLM_CHECK(hit.ok(), "allocation of sequence {} failed after a capacity check: {}",
                  seq->seq_id, hit.status().ToString());
    seq->num_computed = *hit;
    stats_.prefix_cache_hit_tokens += std::min<int64_t>(*hit, seq->prompt_len);
  }
  waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(index));
  group->state = GroupState::kRunning;
  InsertByRank(running_, group);
  EnterRunning(group);
  *num_seqs += SeqsOf(group);
  ScheduleGroup(group, budget);
  return true;
}

const SchedulerOutput& Scheduler::Schedule() {
  out_.seqs.clear();
  out_.copies.clear();
  int64_t budget = options_.max_num_batched_tokens;
  bool preempted = false;
  const bool others = running_.size() + waiting_.size() + swapped_.size() > 1;
  prefill_cap_ = others ? options_.long_prefill_token_threshold : 0;
  scored_budget_ = options_.max_scored_tokens;

  // 1. Running groups, earliest first; preempt from the back when blocks run out.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    SequenceGroup* group = running_[i];
    bool ok = AppendPendingSlots(group);
    while (!ok) {
      preempted = true;
      if (PreemptLatest() == group) break;
      ok = AppendPendingSlots(group);
    }
    if (!ok) break;  // the group itself was the latest: nothing after it is running
    ScheduleGroup(group, &budget);
    ++i;
  }
  int64_t num_seqs = 0;
  for (const SequenceGroup* g : running_) num_seqs += SeqsOf(g);

  // 2-3. Swapped groups come back and new (or recomputing) groups are admitted, earliest
  // first, when nothing was preempted; under fcfs, waiting groups only once none is swapped.
  // A waiting group whose adapter cannot run yet is passed over (next: the first not passed).
  const bool by_priority = options_.policy == SchedulingPolicy::kPriority;
  size_t next = 0;
  const SequenceGroup* blocked = nullptr;  // the first group passed over
  while (!preempted && budget > 0) {
    while (next < waiting_.size() && !AdapterMayRun(waiting_[next], blocked)) {
      SequenceGroup* w = waiting_[next];
      if (w->lora_pass_limit < 0) w->lora_pass_limit = latest_arrival_;
      if (blocked == nullptr) blocked = w;
      ++next;
    }
    const bool any_waiting = next < waiting_.size();
    if (swapped_.empty() && !any_waiting) break;
    const bool admit = swapped_.empty() ||
                       (by_priority && any_waiting && Before(waiting_[next], swapped_.front()));
    if (admit ? !TryAdmit(next, &budget, &num_seqs)
              : !AdapterMayRun(swapped_.front(), nullptr) ||
                    !TrySwapIn(swapped_.front(), &budget, &num_seqs)) {
      break;
    }
  }
  // 4. Drafts, with what is left.
  ScheduleDrafts(budget);
  if (!out_.seqs.empty()) ++stats_.steps;
  return out_;
}

void Scheduler::ScheduleDrafts(int64_t budget) {
  const int64_t bs = bm_->block_size();
  for (ScheduledSeq& s : out_.seqs) {
    std::vector<int32_t>& draft = s.seq->draft;
    if (draft.empty()) continue;
    const bool decode = s.sample && s.num_tokens == 1 && s.seq->num_uncomputed() == 1;
    int64_t n = 0;
    while (decode && n < static_cast<int64_t>(draft.size()) && n < budget && n < scored_budget_) {
      const int64_t id = s.seq->seq_id;
      if (bm_->NumTokens(id) % bs == 0 && !bm_->CanAllocateBlocks(1)) break;
      if (!bm_->AppendSlot(id, draft[n], &out_.copies).ok()) break;
      ++n;
    }
    draft.resize(n);
    s.num_draft = n;
    s.num_tokens += n;
    budget -= n;
    scored_budget_ -= n;
  }
}

void Scheduler::Update(const SchedulerOutput& scheduled, StepResult* result,
                       std::vector<SequenceGroup*>* finished) {
  for (const ScheduledSeq& s : scheduled.seqs) {
    OnComputed(s);
    if (s.sample) s.group->forked = true;  // its first token is sampled
  }
  for (StepResult::Fork& f : result->forks) {
    f.child->num_computed = f.parent->num_computed;
    const absl::Status st = bm_->Fork(f.parent->seq_id, f.child->seq_id);
    PAGELLM_CHECK(st.ok(), "fork of sequence {} in request {} failed: {}", f.parent->seq_id,
                  f.group->request_id, st.ToString());
    f.group->seqs.push_back(std::move(f.child));
  }
  for (const StepResult::Append& a : result->appends) a.seq->tokens.push_back(a.token);
  for (const ScheduledSeq& s : scheduled.seqs) {
    if (s.num_draft > 0) SettleDraft(s);
  }
  for (const StepResult::Finish& f : result->finishes) FinishSequence(f.group, f.seq, f.keep);
  for (const StepResult::Finish& f : result->finishes) {
    SequenceGroup* g = f.group;
    if (!g->seqs.empty() || std::find(finished->begin(), finished->end(), g) != finished->end()) {
      continue;
    }
    Remove(g);
    finished->push_back(g);
  }
  result->Clear();
}

void Scheduler::OnComputed(const ScheduledSeq& s) {
  Sequence* seq = s.seq;
  const int64_t known = s.num_tokens - s.num_draft;  // SettleDraft counts the draft's
  const int64_t prompt_end = std::min(seq->prompt_len, seq->num_computed + known);
  stats_.computed_prompt_tokens += std::max<int64_t>(0, prompt_end - seq->num_computed);
  seq->num_computed += known;
  PAGELLM_CHECK(bm_->MarkComputed(seq->seq_id, seq->num_computed).ok(),
                "sequence {} computed but unknown to the block manager", seq->seq_id);
}

void Scheduler::SettleDraft(const ScheduledSeq& s) {
  Sequence* seq = s.seq;
  std::vector<int32_t>& draft = seq->draft;
  stats_.draft_tokens += s.num_draft;
  // Drafted token i sat at position num_computed + i; its KV holds where the model's own token
  // there (appended this step) is the same, and every earlier one was too.
  const int64_t base = seq->num_computed;
  const auto size = static_cast<int64_t>(seq->tokens.size());
  int64_t accepted = 0;
  while (accepted < s.num_draft && base + accepted < size &&
         seq->tokens[base + accepted] == draft[accepted]) {
    ++accepted;
  }
  draft.clear();
  seq->draft_acceptance += 0.5 * (static_cast<double>(accepted) / static_cast<double>(s.num_draft) -
                                  seq->draft_acceptance);
  stats_.accepted_tokens += accepted;
  seq->num_computed += accepted;
  PAGELLM_CHECK(bm_->Truncate(seq->seq_id, seq->num_computed).ok(),
                "giving back the rejected draft of sequence {}", seq->seq_id);
  PAGELLM_CHECK(bm_->MarkComputed(seq->seq_id, seq->num_computed).ok(),
                "sequence {} computed but unknown to the block manager", seq->seq_id);
}

}  // namespace pagellm
