// Invariants: a sequence is in exactly one of waiting_ / running_ (or neither once removed);
// waiting sequences hold no blocks; running_ and waiting_ are each sorted by arrival.
#include "worker/engine/scheduler.h"

#include <algorithm>

#include "common/logging.h"

namespace pagellm {
namespace {
bool ByArrival(const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; }
}  // namespace

Scheduler::Scheduler(const SchedulerOptions& options, BlockAllocator* allocator)
    : options_(options), allocator_(allocator) {}

int64_t Scheduler::BlocksFor(int64_t num_tokens) const {
  return (num_tokens + options_.block_size - 1) / options_.block_size;
}

void Scheduler::Add(Sequence* seq) {
  seq->state = SequenceState::kWaiting;
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), seq, ByArrival), seq);
}

void Scheduler::FreeBlocks(Sequence* seq) {
  for (int32_t b : seq->block_table) allocator_->Release(b);
  seq->block_table.clear();
  seq->num_computed = 0;
}

void Scheduler::Remove(Sequence* seq) {
  FreeBlocks(seq);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
}

bool Scheduler::Reserve(Sequence* seq, int64_t num_tokens) {
  const int64_t need = BlocksFor(num_tokens);
  while (static_cast<int64_t>(seq->block_table.size()) < need) {
    auto block = allocator_->Allocate();
    if (!block.ok()) return false;
    seq->block_table.push_back(*block);
  }
  return true;
}

void Scheduler::Preempt(Sequence* seq) {
  ++stats_.preemptions;
  FreeBlocks(seq);
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  Add(seq);
}

const std::vector<ScheduledSeq>& Scheduler::Schedule() {
  scheduled_.clear();
  int64_t budget = options_.max_num_batched_tokens;

  // 1. Running sequences, earliest first; preempt from the back when blocks run out.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int64_t n = std::min(seq->num_uncomputed(), budget);
    bool fits = Reserve(seq, seq->num_computed + n);
    while (!fits) {
      Sequence* victim = running_.back();
      // A sequence scheduled earlier in this step is never the victim: it is earlier in order.
      Preempt(victim);
      if (victim == seq) break;
      fits = Reserve(seq, seq->num_computed + n);
    }
    if (!fits) continue;  // seq itself was preempted; running_[i] is now the next one
    scheduled_.push_back({seq, n, seq->num_computed + n == static_cast<int64_t>(seq->tokens.size())});
    budget -= n;
    ++i;
  }

  // 2. Admit waiting sequences in FCFS order while they fit above the watermark.
  const int64_t watermark =
      static_cast<int64_t>(options_.watermark * allocator_->num_blocks());
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < options_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    const int64_t n = std::min(seq->num_uncomputed(), budget);
    // Admission needs room for the whole known sequence, not just this chunk, so a long
    // prompt admitted in chunks is not immediately preempted.
    if (allocator_->num_free() - BlocksFor(seq->tokens.size()) < watermark) break;
    PAGELLM_CHECK(Reserve(seq, seq->num_computed + n), "reserve failed after a capacity check");
    waiting_.pop_front();
    seq->state = SequenceState::kRunning;
    running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, ByArrival), seq);
    scheduled_.push_back({seq, n, seq->num_computed + n == static_cast<int64_t>(seq->tokens.size())});
    budget -= n;
  }
  return scheduled_;
}

}  // namespace pagellm
