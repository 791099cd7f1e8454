// Scheduler: iteration-level FCFS scheduling over a paged KV pool.
//
// Each step it (1) keeps running sequences going in arrival order, giving each the tokens it
// needs (one for decode, a chunk of the remaining prompt for prefill) within the token budget,
// and (2) admits waiting sequences in arrival order while their blocks fit above the watermark.
// When a running sequence cannot get a block, the latest-arrived running sequence is preempted
// by recompute: its blocks are freed and it returns to the front of the waiting queue.
//
// Not thread-safe: owned by the engine thread. Sequences are borrowed (owned by the engine).
#ifndef PAGELLM_WORKER_ENGINE_SCHEDULER_H_
#define PAGELLM_WORKER_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "worker/engine/sequence.h"
#include "worker/kv/block_allocator.h"

namespace pagellm {

struct SchedulerOptions {
  int64_t block_size = 16;
  int64_t max_num_batched_tokens = 2048;
  int64_t max_num_seqs = 256;
  double watermark = 0.01;  // fraction of blocks kept free at admission
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;  // tokens to compute this step, from seq->num_computed
  bool sample = false;     // the chunk ends the sequence's known tokens: sample the next one
};

struct SchedulerStats {
  int64_t preemptions = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, BlockAllocator* allocator);

  void Add(Sequence* seq);  // appends to the waiting queue (FCFS by arrival)
  // Removes a sequence from whichever queue holds it and frees its blocks.
  void Remove(Sequence* seq);

  // Decides this step's work. The returned list is valid until the next call.
  const std::vector<ScheduledSeq>& Schedule();

  // Blocks needed to hold `num_tokens` tokens.
  [[nodiscard]] int64_t BlocksFor(int64_t num_tokens) const;
  [[nodiscard]] int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  [[nodiscard]] int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  [[nodiscard]] const SchedulerStats& stats() const { return stats_; }

 private:
  // Grows seq's block table to hold `num_tokens`; false if the pool ran out (nothing leaked:
  // blocks already taken stay in the table and are freed with the sequence).
  bool Reserve(Sequence* seq, int64_t num_tokens);
  void FreeBlocks(Sequence* seq);
  void Preempt(Sequence* seq);

  SchedulerOptions options_;
  BlockAllocator* allocator_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // arrival order
  std::vector<ScheduledSeq> scheduled_;
  SchedulerStats stats_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_SCHEDULER_H_
