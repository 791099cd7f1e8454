// Scheduler tests with a real BlockAllocator and hand-made sequences (no model). The helper
// Advance() plays the engine: every scheduled chunk is computed, and a chunk that ends the
// known tokens yields one new token.
#include "worker/engine/scheduler.h"

#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  // (Re)builds the allocator and scheduler; call before adding sequences.
  void Init(int32_t num_blocks, SchedulerOptions options) {
    seqs_.clear();
    next_arrival_ = 0;
    options_ = options;
    allocator_ = std::make_unique<BlockAllocator>(num_blocks);
    scheduler_ = std::make_unique<Scheduler>(options_, allocator_.get());
  }
  void Init(int32_t num_blocks, int64_t block_size, int64_t budget, int64_t max_seqs = 256,
            double watermark = 0.0) {
    SchedulerOptions o;
    o.block_size = block_size;
    o.max_num_batched_tokens = budget;
    o.max_num_seqs = max_seqs;
    o.watermark = watermark;
    Init(num_blocks, o);
  }

  // A sequence with a `prompt_len`-token prompt and the next arrival number (or `arrival`).
  Sequence* NewSeq(int64_t prompt_len, int64_t arrival = -1) {
    auto seq = std::make_unique<Sequence>();
    seq->arrival = arrival >= 0 ? arrival : next_arrival_++;
    seq->request_id = std::to_string(seq->arrival);
    seq->prompt_len = prompt_len;
    seq->tokens.assign(prompt_len, 1);
    seqs_.push_back(std::move(seq));
    return seqs_.back().get();
  }
  Sequence* AddSeq(int64_t prompt_len, int64_t arrival = -1) {
    Sequence* seq = NewSeq(prompt_len, arrival);
    scheduler_->Add(seq);
    return seq;
  }

  // Applies what the engine does after a step: computes the chunks and samples where asked.
  static void Advance(const std::vector<ScheduledSeq>& sched) {
    for (const ScheduledSeq& s : sched) {
      s.seq->num_computed += s.num_tokens;
      if (s.sample) s.seq->tokens.push_back(2);
    }
  }
  // Schedules one step, advances it and returns a copy of the schedule.
  std::vector<ScheduledSeq> Step() {
    std::vector<ScheduledSeq> sched = scheduler_->Schedule();
    Advance(sched);
    return sched;
  }

  int64_t HeldBlocks() const {
    int64_t n = 0;
    for (const auto& s : seqs_) n += static_cast<int64_t>(s->block_table.size());
    return n;
  }
  // Free count == total - held, no block held twice, every held block has one reference.
  void ExpectAccounting() const {
    EXPECT_EQ(allocator_->num_free(), allocator_->num_blocks() - HeldBlocks());
    absl::flat_hash_set<int32_t> seen;
    for (const auto& s : seqs_) {
      for (int32_t b : s->block_table) {
        EXPECT_TRUE(seen.insert(b).second) << "block " << b << " held twice";
        EXPECT_EQ(allocator_->ref_count(b), 1) << "block " << b;
      }
    }
  }

  SchedulerOptions options_;
  std::unique_ptr<BlockAllocator> allocator_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  int64_t next_arrival_ = 0;
};

// Compact form of a schedule for EXPECT_EQ: (arrival, num_tokens, sample).
struct Entry {
  int64_t arrival;
  int64_t num_tokens;
  bool sample;
  bool operator==(const Entry&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Entry& e) {
  return os << "{" << e.arrival << ", " << e.num_tokens << ", " << e.sample << "}";
}
std::vector<Entry> Entries(const std::vector<ScheduledSeq>& sched) {
  std::vector<Entry> out;
  for (const ScheduledSeq& s : sched) out.push_back({s.seq->arrival, s.num_tokens, s.sample});
  return out;
}

TEST_F(SchedulerTest, BlocksForRoundsUp) {
  Init(8, /*block_size=*/4, /*budget=*/64);
  EXPECT_EQ(scheduler_->BlocksFor(0), 0);
  EXPECT_EQ(scheduler_->BlocksFor(1), 1);
  EXPECT_EQ(scheduler_->BlocksFor(4), 1);
  EXPECT_EQ(scheduler_->BlocksFor(5), 2);
}

TEST_F(SchedulerTest, AdmitsInArrivalOrderWhateverTheAddOrder) {
  Init(64, 4, /*budget=*/100);
  AddSeq(5, /*arrival=*/2);
  AddSeq(3, /*arrival=*/0);
  AddSeq(4, /*arrival=*/1);
  EXPECT_EQ(Entries(Step()),
            (std::vector<Entry>{{0, 3, true}, {1, 4, true}, {2, 5, true}}));
  EXPECT_EQ(scheduler_->num_running(), 3);
  EXPECT_EQ(scheduler_->num_waiting(), 0);
  // Decodes keep the same order.
  EXPECT_EQ(Entries(Step()),
            (std::vector<Entry>{{0, 1, true}, {1, 1, true}, {2, 1, true}}));
  ExpectAccounting();
}

TEST_F(SchedulerTest, BudgetGoesToEarlierArrivalsFirst) {
  // The budget fits only the first prompt entirely; the second gets the remainder as a chunk.
  Init(64, 4, /*budget=*/10);
  AddSeq(8);
  AddSeq(8);
  AddSeq(8);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 8, true}, {1, 2, false}}));
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  ExpectAccounting();
}

TEST_F(SchedulerTest, ChunkedPrefillSharesBudgetWithDecodes) {
  Init(64, 4, /*budget=*/8);
  Sequence* a = AddSeq(3);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 3, true}}));
  Sequence* b = AddSeq(20);
  // The decode of `a` gets its token every step; `b`'s prompt fills the rest of the budget.
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 7, false}}));
  EXPECT_EQ(b->num_computed, 7);
  EXPECT_EQ(b->block_table.size(), 2u);  // blocks for the computed chunk only
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 7, false}}));
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 6, true}}));
  EXPECT_EQ(b->num_computed, 20);
  EXPECT_EQ(b->tokens.size(), 21u);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 1, true}}));
  EXPECT_EQ(a->num_output(), 5);
  ExpectAccounting();
}

TEST_F(SchedulerTest, SamplesOnlyOnTheChunkThatCompletesTheKnownTokens) {
  Init(64, 4, /*budget=*/5);
  Sequence* a = AddSeq(12);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 5, false}}));
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 5, false}}));
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 2, true}}));
  EXPECT_EQ(a->num_output(), 1);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}}));
}

TEST_F(SchedulerTest, BudgetLeftAfterPrefillChunkAdmitsNothingMore) {
  Init(64, 4, /*budget=*/4);
  AddSeq(4);
  AddSeq(2);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 4, true}}));
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 2, true}}));
}

TEST_F(SchedulerTest, MaxNumSeqsCapsRunningSequences) {
  Init(64, 4, /*budget=*/100, /*max_seqs=*/2);
  Sequence* a = AddSeq(3);
  AddSeq(3);
  AddSeq(3);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 3, true}, {1, 3, true}}));
  EXPECT_EQ(scheduler_->num_running(), 2);
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 1, true}}));
  scheduler_->Remove(a);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{1, 1, true}, {2, 3, true}}));
  ExpectAccounting();
}

TEST_F(SchedulerTest, WatermarkBlocksAdmission) {
  // 10 blocks, watermark 0.2: admission must leave 2 blocks free.
  Init(10, 4, /*budget=*/100, /*max_seqs=*/256, /*watermark=*/0.2);
  AddSeq(33);  // 9 blocks: would fit the pool, but leaves only 1 free
  AddSeq(4);   // FCFS: may not overtake the head of the queue
  EXPECT_TRUE(scheduler_->Schedule().empty());
  EXPECT_EQ(scheduler_->num_waiting(), 2);
  EXPECT_EQ(allocator_->num_free(), 10);

  Init(10, 4, /*budget=*/100, /*max_seqs=*/256, /*watermark=*/0.2);
  AddSeq(32);  // 8 blocks: leaves exactly the watermark
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 32, true}}));
  AddSeq(1);   // would leave 1 free block (the first sequence's next token takes another)
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}}));
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  ExpectAccounting();
}

TEST_F(SchedulerTest, AdmissionNeedsRoomForTheWholePromptNotOnlyTheChunk) {
  Init(4, 4, /*budget=*/4);
  AddSeq(4);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 4, true}}));  // 1 block, now 5 tokens
  AddSeq(13);  // 4 blocks; the first chunk (4 tokens) alone would fit
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}}));
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  ExpectAccounting();
}

TEST_F(SchedulerTest, PreemptsTheLatestArrivedRunningSequence) {
  // 4 blocks of 2 tokens. Three 2-token prompts take a block each.
  Init(4, 2, /*budget=*/100);
  Sequence* a = AddSeq(2);
  Sequence* b = AddSeq(2);
  Sequence* c = AddSeq(2);
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 2, true}, {1, 2, true}, {2, 2, true}}));
  Sequence* d = AddSeq(1);  // arrives after c; waits (no room)
  ExpectAccounting();
  // Each now needs a second block: a takes the last free one, b needs c's (the latest running).
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 1, true}}));
  EXPECT_EQ(scheduler_->stats().preemptions, 1);
  EXPECT_EQ(c->state, SequenceState::kWaiting);
  EXPECT_EQ(c->num_computed, 0);
  EXPECT_TRUE(c->block_table.empty());
  EXPECT_EQ(c->tokens.size(), 3u);  // generated tokens are kept and recomputed
  EXPECT_EQ(scheduler_->num_running(), 2);
  EXPECT_EQ(scheduler_->num_waiting(), 2);
  ExpectAccounting();
  // Once room appears, c goes first (front of the queue, ahead of d) and recomputes everything.
  scheduler_->Remove(a);
  scheduler_->Remove(b);
  ExpectAccounting();
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{2, 3, true}, {3, 1, true}}));
  EXPECT_EQ(d->state, SequenceState::kRunning);
  ExpectAccounting();
}

TEST_F(SchedulerTest, LatestSequencePreemptsItselfWhenNothingLaterRuns) {
  Init(3, 2, /*budget=*/100);
  Sequence* a = AddSeq(3);  // 2 blocks
  Sequence* b = AddSeq(2);  // 1 block
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 3, true}, {1, 2, true}}));
  // a (4 tokens) still fits its 2 blocks; b (3 tokens) needs a second block and is the latest.
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}}));
  EXPECT_EQ(scheduler_->stats().preemptions, 1);
  EXPECT_EQ(b->state, SequenceState::kWaiting);
  EXPECT_TRUE(b->block_table.empty());
  EXPECT_EQ(a->state, SequenceState::kRunning);
  ExpectAccounting();
}

TEST_F(SchedulerTest, PreemptsSeveralUntilTheBlockFits) {
  // 6 blocks of 1 token: a holds 2 blocks, b..e one each.
  Init(6, 1, /*budget=*/100);
  Sequence* a = AddSeq(2);
  for (int i = 0; i < 4; ++i) AddSeq(1);
  Step();
  EXPECT_EQ(allocator_->num_free(), 0);
  // Every sequence needs one more block. a takes e's, b takes d's, c would take itself.
  EXPECT_EQ(Entries(Step()), (std::vector<Entry>{{0, 1, true}, {1, 1, true}}));
  EXPECT_EQ(scheduler_->stats().preemptions, 3);
  EXPECT_EQ(scheduler_->num_waiting(), 3);
  EXPECT_EQ(a->block_table.size(), 3u);
  ExpectAccounting();
}

TEST_F(SchedulerTest, RemoveFreesBlocksInEveryState) {
  Init(32, 4, /*budget=*/10);
  Sequence* decoding = AddSeq(5);
  Sequence* prefilling = AddSeq(30);
  Sequence* waiting = AddSeq(2);  // the budget goes to the first two
  Step();
  Step();
  ASSERT_EQ(waiting->state, SequenceState::kWaiting);
  EXPECT_GT(decoding->num_output(), 0);
  EXPECT_GT(prefilling->num_computed, 0);
  EXPECT_LT(prefilling->num_computed, 30);
  EXPECT_FALSE(prefilling->block_table.empty());
  ExpectAccounting();

  scheduler_->Remove(prefilling);
  EXPECT_TRUE(prefilling->block_table.empty());
  ExpectAccounting();
  scheduler_->Remove(decoding);
  ExpectAccounting();
  EXPECT_EQ(scheduler_->num_running(), 0);
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  scheduler_->Remove(waiting);
  ExpectAccounting();
  EXPECT_EQ(scheduler_->num_waiting(), 0);
  EXPECT_EQ(allocator_->num_free(), 32);
  EXPECT_TRUE(scheduler_->Schedule().empty());
}

TEST_F(SchedulerTest, RemoveOfAPreemptedSequence) {
  Init(3, 2, /*budget=*/100);
  AddSeq(3);
  Sequence* b = AddSeq(2);
  Step();
  Step();
  ASSERT_EQ(b->state, SequenceState::kWaiting);
  scheduler_->Remove(b);
  EXPECT_EQ(scheduler_->num_waiting(), 0);
  ExpectAccounting();
}

// Random add / schedule / advance / remove with the accounting checked after every operation.
// Sequences finish (are removed) after a random number of outputs; as in the engine, no
// sequence ever needs more blocks than the pool minus the watermark.
TEST_F(SchedulerTest, FuzzKeepsBlockAccounting) {
  int64_t total_preemptions = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int32_t num_blocks = uniform(4, 40);
    const int64_t block_size = uniform(1, 8);
    Init(num_blocks, block_size, /*budget=*/uniform(1, 64), /*max_seqs=*/uniform(1, 8),
         /*watermark=*/uniform(0, 1) * 0.1);
    const int64_t max_len =
        (num_blocks - static_cast<int64_t>(options_.watermark * num_blocks)) * block_size;
    std::vector<Sequence*> live;
    std::vector<int64_t> max_output;  // per arrival
    for (int op = 0; op < 400; ++op) {
      const int kind = uniform(0, 9);
      if (kind <= 2) {  // add
        const int64_t prompt = uniform(1, static_cast<int>(std::max<int64_t>(1, max_len - 1)));
        live.push_back(AddSeq(prompt));
        max_output.push_back(uniform(1, static_cast<int>(std::max<int64_t>(1, max_len - prompt))));
      } else if (kind <= 7) {  // schedule + advance, remove the finished ones
        const bool idle_before = scheduler_->num_running() == 0 && scheduler_->num_waiting() > 0;
        const std::vector<ScheduledSeq>& sched = scheduler_->Schedule();
        ExpectAccounting();
        if (idle_before) {
          EXPECT_FALSE(sched.empty()) << "no progress with an empty pool";
        }
        int64_t tokens = 0;
        absl::flat_hash_set<Sequence*> once;
        for (const ScheduledSeq& s : sched) {
          EXPECT_TRUE(once.insert(s.seq).second);
          EXPECT_GT(s.num_tokens, 0);
          EXPECT_EQ(s.seq->state, SequenceState::kRunning);
          EXPECT_GE(static_cast<int64_t>(s.seq->block_table.size()),
                    scheduler_->BlocksFor(s.seq->num_computed + s.num_tokens));
          EXPECT_EQ(s.sample, s.seq->num_computed + s.num_tokens ==
                                  static_cast<int64_t>(s.seq->tokens.size()));
          tokens += s.num_tokens;
        }
        EXPECT_LE(tokens, options_.max_num_batched_tokens);
        EXPECT_LE(static_cast<int64_t>(sched.size()), options_.max_num_seqs);
        EXPECT_LE(scheduler_->num_running(), options_.max_num_seqs);
        std::vector<ScheduledSeq> copy = sched;
        Advance(copy);
        for (const ScheduledSeq& s : copy) {
          if (s.seq->num_output() >= max_output[s.seq->arrival]) {
            scheduler_->Remove(s.seq);
            std::erase(live, s.seq);
            ExpectAccounting();
          }
        }
      } else if (!live.empty()) {  // abort a random live sequence
        const size_t i = uniform(0, static_cast<int>(live.size()) - 1);
        scheduler_->Remove(live[i]);
        live.erase(live.begin() + i);
      }
      ExpectAccounting();
      for (Sequence* s : live) {
        if (s->state == SequenceState::kWaiting) {
          EXPECT_TRUE(s->block_table.empty());
          EXPECT_EQ(s->num_computed, 0);
        }
      }
      EXPECT_EQ(scheduler_->num_running() + scheduler_->num_waiting(),
                static_cast<int64_t>(live.size()));
      if (HasFailure()) return;
    }
    total_preemptions += scheduler_->stats().preemptions;
    for (Sequence* s : live) scheduler_->Remove(s);
    EXPECT_EQ(allocator_->num_free(), num_blocks);
    EXPECT_EQ(scheduler_->num_running() + scheduler_->num_waiting(), 0);
    ExpectAccounting();
  }
  EXPECT_GT(total_preemptions, 0) << "the fuzz never ran out of blocks";
}

}  // namespace
}  // namespace pagellm
