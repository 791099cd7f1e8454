// Scheduler: iteration-level FCFS scheduling of sequence groups over the paged KV pool of a
// BlockManager, with chunked prefill and all-or-nothing preemption.
//
// Each Schedule() call:
//   1. Running groups, earliest arrival first: every live sequence first gets the KV slot of any
//      token sampled last step (BlockManager::AppendSlot, which may copy a shared last block),
//      then its share of the step: one token for a decode, a chunk of the remaining prompt for a
//      prefill, within the token budget (--max-num-batched-tokens). When the pool runs out, the
//      latest-arrived running group is preempted, by recompute (free its blocks, back to the front
//      of the waiting queue), by swap (blocks to the CPU pool), or automatically (recompute for a
//      single sequence, swap for a group sharing blocks). A swap that does not fit the CPU pool
//      falls back to recompute.
//   2. When nothing was preempted this step, swapped groups come back in arrival order.
//   3. When nothing was preempted and no group is swapped out, waiting groups are admitted in arrival order while their
//      blocks fit above the watermark and the sequence cap (--max-num-seqs) allows. Admission
//      allocates blocks for every known token (so a prompt admitted in chunks is not preempted
//      midway); prefix-cache hits start the sequence with those tokens already computed.
//
// The caller runs the step (executing `copies` in order first), then reports every scheduled
// sequence with OnComputed(), and only then samples: appends sampled tokens to
// Sequence::tokens, forks, and finishes sequences and groups (FinishSequence / Remove invalidate
// the output's pointers to them). Not thread-safe: owned by the engine thread. Groups and sequences are
// borrowed: the caller owns them and must Remove() a group before destroying it.
#ifndef PAGELLM_WORKER_ENGINE_SCHEDULER_H_
#define PAGELLM_WORKER_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/engine/sequence.h"
#include "worker/kv/block_manager.h"
#include "worker/kv/kv_copy.h"

namespace pagellm {

enum class PreemptionMode { kAuto, kRecompute, kSwap };

// Parses "auto" | "recompute" | "swap". InvalidArgument otherwise.
absl::StatusOr<PreemptionMode> ParsePreemptionMode(const std::string& name);

struct SchedulerOptions {
  int64_t max_num_batched_tokens = 2048;  // tokens computed per step, > 0
  int64_t max_num_seqs = 256;             // sequences running at once, > 0
  PreemptionMode preemption_mode = PreemptionMode::kAuto;
};

struct ScheduledSeq {
  SequenceGroup* group = nullptr;
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;  // tokens to compute this step, from seq->num_computed
  bool sample = false;     // the chunk ends the sequence's known tokens: sample the next one
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;  // grouped: a group's live sequences are adjacent
  std::vector<KvCopy> copies;      // executed in this order before the forward pass
};

struct SchedulerStats {
  int64_t steps = 0;  // Schedule() calls that scheduled something
  int64_t preemptions_recompute = 0;
  int64_t preemptions_swap = 0;
  int64_t swap_fallbacks = 0;  // swap preemptions that fell back to recompute (CPU pool short)
  int64_t swapped_out_blocks = 0;
  int64_t swapped_in_blocks = 0;
  int64_t computed_prompt_tokens = 0;  // prompt tokens computed (recomputation counts again)
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
  // Frees the blocks of one live sequence of a running group and moves it from group->seqs to
  // group->done (finished sample, dropped or finished beam). REQUIRES: seq is in group->seqs.
  void FinishSequence(SequenceGroup* group, Sequence* seq, bool keep);
  // Adds `child` to a running group, sharing every block of `parent` (copy-on-write later).
  // REQUIRES: parent is a live, device-resident sequence of the group whose KV slots match its
  // tokens except for tokens the caller has not yet appended; child->tokens starts as a copy of
  // parent->tokens at the time of the fork.
  absl::Status Fork(SequenceGroup* group, Sequence* parent, std::unique_ptr<Sequence> child);

  // Decides this step's work. The output is valid until the next call.
  const SchedulerOutput& Schedule();
  // Records that a scheduled chunk was computed: advances num_computed and lets the prefix cache
  // take the blocks that became full.
  void OnComputed(const ScheduledSeq& s);

  [[nodiscard]] int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  [[nodiscard]] int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  [[nodiscard]] int64_t num_swapped() const { return static_cast<int64_t>(swapped_.size()); }
  [[nodiscard]] const SchedulerStats& stats() const { return stats_; }
  [[nodiscard]] const BlockManager& block_manager() const { return *bm_; }

 private:
  // Appends the slots of tokens sampled since the last step. False if the pool ran out (slots
  // already appended stay; copies emitted so far are harmless).
  bool AppendPendingSlots(SequenceGroup* group);
  // Preempts the latest-arrived running group. Returns it.
  SequenceGroup* PreemptLatest();
  void PreemptByRecompute(SequenceGroup* group);
  bool TrySwapOut(SequenceGroup* group);
  bool TrySwapIn(SequenceGroup* group, int64_t* budget, int64_t* num_seqs);
  bool TryAdmit(SequenceGroup* group, int64_t* budget, int64_t* num_seqs);
  // Schedules the group's live sequences within the budget; all or none of its decodes.
  void ScheduleGroup(SequenceGroup* group, int64_t* budget);
  void FreeBlocks(SequenceGroup* group);
  std::vector<int64_t>& SeqIds(const SequenceGroup* group);
  void AddCopies(const std::vector<BlockCopy>& copies, KvCopy::Kind kind);

  SchedulerOptions options_;
  BlockManager* bm_;
  std::deque<SequenceGroup*> waiting_;   // arrival order; recomputed groups return in order
  std::vector<SequenceGroup*> running_;  // arrival order
  std::vector<SequenceGroup*> swapped_;  // arrival order
  SchedulerOutput out_;
  SchedulerStats stats_;
  std::vector<int64_t> ids_scratch_;
  std::vector<BlockCopy> copy_scratch_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_SCHEDULER_H_
