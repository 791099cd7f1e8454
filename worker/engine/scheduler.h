// Scheduler: iteration-level scheduling of sequence groups over the paged KV pool of a
// BlockManager, with chunked prefill and all-or-nothing preemption.
//
// Groups are ranked by arrival (--scheduling-policy fcfs, the default) or by (priority, arrival)
// (priority: a smaller SamplingParams::priority goes first, as in vLLM). Every queue is kept in
// rank order, and below "earliest" and "latest" mean by rank.
//
// Each Schedule() call:
//   1. Running groups, earliest first: every live sequence first gets the KV slot of any
//      token sampled last step (BlockManager::AppendSlot, which may copy a shared last block),
//      then its share of the step: one token for a decode, a chunk of the remaining prompt for a
//      prefill, within the token budget (--max-num-batched-tokens). When the pool runs out, the
//      latest running group is preempted (under priority: the lowest priority, latest arrival), by
//      recompute (free its blocks, back to the front of the waiting queue), by swap (blocks to the
//      swap pool), or automatically (recompute for a single sequence, swap for a group sharing
//      blocks). A swap that does not fit the swap pool falls back to recompute.
//   2-3. When nothing was preempted this step, swapped groups come back and waiting groups are
//      admitted, earliest first, while their blocks fit above the watermark and the sequence cap
//      (--max-num-seqs) allows, stopping at the first that does not fit. Under fcfs every
//      swapped group comes back before any waiting group is admitted; under priority a waiting
//      group that outranks the first swapped one goes before it. LoRA adapters that move in and
//      out of the backend's slots (SequenceGroup::adapter_swaps) run at most lora_slots distinct
//      ones at once: a group whose adapter would exceed that waits -- a swapped one stops the
//      admissions, a waiting one is passed over. Groups without such an adapter (base model, or
//      an adapter fixed in its slot) pass it; so do groups of the running adapters, but only
//      those that had arrived when it was first passed over (a burst of one adapter's requests
//      runs together), so that the running adapters drain and its turn comes. (vLLM passes such a
//      request over too, but lets every later request of the running adapters pass it: a busy
//      adapter can starve it.) A waiting group never
//      preempts a running one (as in vLLM v1: priority orders the queues and picks the victims).
//      Admission allocates blocks for every known token (so a prompt admitted in chunks is not
//      preempted midway); prefix-cache hits start the sequence with those tokens already computed,
//      except for a group that scores its prompt (prompt logprobs), whose chunks also share a
//      per-step budget (max_scored_tokens).
//   4. Speculation takes what is left: a scheduled decode whose sequence carries a draft
//      (Sequence::draft) computes as many of the draft's tokens after its own as the remaining
//      budget and the blocks above the watermark allow; a draft never preempts or delays
//      anything. Update() keeps the drafted tokens the step's appends confirm, in order, and
//      gives the slots of the others back (BlockManager::Truncate).
//
// The caller runs the step (executing `copies` in order first), decides what each sampled
// sequence does -- a new token, a fork, a finish -- and hands that to Update(), which applies it
// (cf. vLLM v1's schedule() / update_from_output()). The engine, the simulator and the tests all
// drive the scheduler this way; none of them touches the block manager. Not thread-safe: owned
// by the engine thread. Groups and sequences are borrowed: the caller owns them and must
// Remove() a group (or see it leave through Update) before destroying it.
#ifndef PAGELLM_WORKER_ENGINE_SCHEDULER_H_
#define PAGELLM_WORKER_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/engine/sequence.h"
#include "worker/kv/block_manager.h"
#include "worker/kv/kv_copy.h"

namespace pagellm {

enum class PreemptionMode { kAuto, kRecompute, kSwap };

// Parses "auto" | "recompute" | "swap". InvalidArgument otherwise.
absl::StatusOr<PreemptionMode> ParsePreemptionMode(const std::string& name);

enum class SchedulingPolicy { kFcfs, kPriority };

// Parses "fcfs" | "priority" (vLLM's --scheduling-policy). InvalidArgument otherwise.
absl::StatusOr<SchedulingPolicy> ParseSchedulingPolicy(const std::string& name);

struct SchedulerOptions {
  int64_t max_num_batched_tokens = 2048;  // tokens computed per step, > 0
  // While other requests run or wait, one sequence's prompt chunk takes at most this many of a
  // step's tokens, so that a long prompt neither stalls the running streams nor keeps new
  // requests out until its whole prefill is done (vLLM's --long-prefill-token-threshold).
  // Alone, a prompt takes the whole budget. 0: no cap.
  int64_t long_prefill_token_threshold = 0;
  int64_t max_num_seqs = 256;  // sequences running at once, > 0
  PreemptionMode preemption_mode = PreemptionMode::kAuto;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // Logits rows a step may take beyond one per sampled sequence, > 0: prompt tokens of groups
  // that score their prompt (prompt logprobs), then drafted tokens, share them.
  int64_t max_scored_tokens = 256;
  // Distinct adapters, among those that move in and out of the backend's slots
  // (SequenceGroup::adapter_swaps), that running groups may use at once: the slots free for
  // them (see Engine). >= 1 wherever such a group is added; set_lora_slots changes it.
  int64_t lora_slots = 0;
};

struct ScheduledSeq {
  SequenceGroup* group = nullptr;
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;  // tokens to compute this step, from seq->num_computed
  bool sample = false;     // the chunk ends the sequence's known tokens: sample the next one
  // The last num_draft of num_tokens are seq->draft (all of it): speculated tokens after the
  // known ones, each to be checked against the token sampled before it.
  int64_t num_draft = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;  // grouped: a group's live sequences are adjacent
  std::vector<KvCopy> copies;      // executed in this order before the forward pass
};

// What one step did to the sequences it scheduled, as the caller decided it after sampling.
// Update() applies it in this order: every scheduled chunk is computed; forks; appends; the
// drafted tokens the appends confirm are computed too (a draft's sequence is not forked);
// finishes; groups left without a live sequence leave the scheduler. Pointers name live
// sequences of the step's groups (a fork's child may be appended to and finished in the same
// step).
struct StepResult {
  struct Fork {
    SequenceGroup* group = nullptr;
    Sequence* parent = nullptr;
    // Its tokens start as a copy of the parent's before this step's appends; it shares the
    // parent's blocks (copy-on-write later) and starts with the parent's computed tokens.
    std::unique_ptr<Sequence> child;
  };
  struct Append {
    Sequence* seq = nullptr;
    int32_t token = -1;
  };
  struct Finish {
    SequenceGroup* group = nullptr;
    Sequence* seq = nullptr;
    bool keep = false;  // move it to group->done (beam hypotheses) or destroy it
  };
  std::vector<Fork> forks;
  std::vector<Append> appends;
  std::vector<Finish> finishes;

  void Clear() {
    forks.clear();
    appends.clear();
    finishes.clear();
  }
};

struct SchedulerStats {
  int64_t steps = 0;  // Schedule() calls that scheduled something
  int64_t preemptions_recompute = 0;
  int64_t preemptions_swap = 0;
  int64_t swap_fallbacks = 0;  // swap preemptions that fell back to recompute (swap pool short)
  int64_t swapped_out_blocks = 0;
  int64_t swapped_in_blocks = 0;
  int64_t draft_tokens = 0;             // speculated tokens computed (SchedulerOutput num_draft)
  int64_t accepted_tokens = 0;          // ... of which the model's own choices confirmed
  int64_t computed_prompt_tokens = 0;   // prompt tokens computed (recomputation counts again)
  int64_t prefix_cache_hit_tokens = 0;  // prompt tokens admitted as already computed
};

class Scheduler {
 public:
  // `block_manager` is borrowed and must outlive the scheduler.
  Scheduler(const SchedulerOptions& options, BlockManager* block_manager);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a new group (state kWaiting, one sequence or more, no blocks). REQUIRES: every live
  // sequence has a seq_id unknown to the block manager.
  void Add(SequenceGroup* group);
  // Removes the group from whichever queue holds it and frees every block of its live
  // sequences. Safe in any state. The group's sequences keep their tokens.
  void Remove(SequenceGroup* group);
  // Decides this step's work. The output is valid until the next call.
  const SchedulerOutput& Schedule();
  // Applies the results of the step `scheduled` (the last Schedule()'s output) described by
  // `result` (whose forks are moved from; cleared on return). Appends to `finished` the groups
  // that have no live sequence left; they are no longer in the scheduler, and the caller may
  // destroy them. REQUIRES: every pointer in `result` names a live sequence of a scheduled group
  // (or a fork's child); a fork's parent is device-resident.
  void Update(const SchedulerOutput& scheduled, StepResult* result,
              std::vector<SequenceGroup*>* finished);

  // The slots free for adapters that move (SchedulerOptions::lora_slots) changed: an adapter fixed
  // in its slot was unloaded, or a slot broke. Groups already running stay.
  void set_lora_slots(int64_t n) { options_.lora_slots = n; }

  [[nodiscard]] int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  [[nodiscard]] int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  [[nodiscard]] int64_t num_swapped() const { return static_cast<int64_t>(swapped_.size()); }
  [[nodiscard]] const SchedulerStats& stats() const { return stats_; }
  [[nodiscard]] const BlockManager& block_manager() const { return *bm_; }

 private:
  // Appends the slots of tokens sampled since the last step. False if the pool ran out (slots
  // already appended stay; copies emitted so far are harmless).
  bool AppendPendingSlots(SequenceGroup* group);
  // Records that a scheduled chunk was computed: advances num_computed and lets the prefix cache
  // take the blocks that became full.
  void OnComputed(const ScheduledSeq& s);
  // Frees the blocks of one live sequence of a running group and moves it from group->seqs to
  // group->done when `keep` (destroys it otherwise). REQUIRES: seq is in group->seqs.
  void FinishSequence(SequenceGroup* group, Sequence* seq, bool keep);
  // True when `a` ranks before `b` (see the file comment).
  [[nodiscard]] bool Before(const SequenceGroup* a, const SequenceGroup* b) const;
  template <typename Queue>
  void InsertByRank(Queue& q, SequenceGroup* g);
  // Preempts the latest running group. Returns it.
  SequenceGroup* PreemptLatest();
  void PreemptByRecompute(SequenceGroup* group);
  bool TrySwapOut(SequenceGroup* group);
  bool TrySwapIn(SequenceGroup* group, int64_t* budget, int64_t* num_seqs);
  // Admits waiting_[index].
  bool TryAdmit(size_t index, int64_t* budget, int64_t* num_seqs);
  // False when the group's adapter cannot run now (see the file comment): it is not one of the
  // running groups' moving adapters and those are lora_slots already or `blocked` (an earlier
  // group passed over in this step, or null) waits; or it is one of them but arrived after
  // `blocked` was first passed over.
  [[nodiscard]] bool AdapterMayRun(const SequenceGroup* group, const SequenceGroup* blocked) const;
  // Counts the group's adapter while it is in running_.
  void EnterRunning(SequenceGroup* group);
  void LeaveRunning(const SequenceGroup* group);
  // Schedules the group's live sequences within the budget; all or none of its decodes.
  void ScheduleGroup(SequenceGroup* group, int64_t* budget);
  // Step 4: extends scheduled decodes by their drafts within `budget`.
  void ScheduleDrafts(int64_t budget);
  // After the appends: computes the drafted tokens they confirmed and gives back the rest.
  void SettleDraft(const ScheduledSeq& s);
  void FreeBlocks(SequenceGroup* group);
  std::vector<int64_t>& SeqIds(const SequenceGroup* group);
  void AddCopies(const std::vector<KvCopy>& copies);

  SchedulerOptions options_;
  BlockManager* bm_;
  std::deque<SequenceGroup*> waiting_;   // rank order; recomputed groups return in order
  std::vector<SequenceGroup*> running_;  // rank order
  std::vector<SequenceGroup*> swapped_;  // rank order
  SchedulerOutput out_;
  SchedulerStats stats_;
  int64_t prefill_cap_ = 0;    // this step's cap on one prompt chunk (0: none), set by Schedule
  int64_t scored_budget_ = 0;  // this step's extra logits rows left (scoring, then drafts)
  std::vector<int64_t> ids_scratch_;
  int64_t latest_arrival_ = -1;  // the largest SequenceGroup::arrival added
  // Running groups per moving adapter (SequenceGroup::adapter), for those in use.
  absl::flat_hash_map<int32_t, int64_t> running_adapters_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_SCHEDULER_H_
