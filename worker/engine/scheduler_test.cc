// Scheduler tests with a real BlockManager and hand-made sequence groups (no model). The
// fixture's Step() plays the engine: every scheduled chunk is computed, a chunk that ends the
// known tokens yields one new token, a group with n > 1 forks at its first token, and a
// sequence finishes after its group's output length.
#include "worker/engine/scheduler.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  struct Config {
    int32_t device_blocks = 64;
    int32_t swap_blocks = 0;
    int32_t block_size = 4;
    int64_t budget = 2048;
    int64_t max_seqs = 256;
    PreemptionMode mode = PreemptionMode::kAuto;
    bool prefix_caching = false;
    double watermark = 0.0;
    int64_t long_prefill = 0;
    int64_t max_scored = 256;
    SchedulingPolicy policy = SchedulingPolicy::kFcfs;
    int64_t lora_slots = 0;
  };

  void Init(const Config& c) {
    config_ = c;
    groups_.clear();
    output_len_.clear();
    BlockManager::Options bo;
    bo.num_device_blocks = c.device_blocks;
    bo.num_swap_blocks = c.swap_blocks;
    bo.block_size = c.block_size;
    bo.watermark = c.watermark;
    bo.enable_prefix_caching = c.prefix_caching;
    auto bm = BlockManager::Create(bo);
    ASSERT_TRUE(bm.ok()) << bm.status();
    bm_ = std::move(*bm);
    SchedulerOptions so;
    so.max_num_batched_tokens = c.budget;
    so.long_prefill_token_threshold = c.long_prefill;
    so.max_num_seqs = c.max_seqs;
    so.preemption_mode = c.mode;
    so.max_scored_tokens = c.max_scored;
    so.policy = c.policy;
    so.lora_slots = c.lora_slots;
    scheduler_ = std::make_unique<Scheduler>(so, bm_.get());
  }

  // A group whose prompt is `prompt_len` tokens (distinct per group unless `first_token` is
  // given) that generates `output_len` tokens per sequence, with n parallel sequences.
  SequenceGroup* Add(int64_t prompt_len, int64_t output_len, int32_t n = 1,
                     int32_t first_token = -1, int32_t priority = 0) {
    auto g = std::make_unique<SequenceGroup>();
    g->request_id = std::to_string(next_arrival_);
    g->arrival = next_arrival_++;
    g->max_seqs = n;
    g->params.n = n;
    g->params.priority = priority;
    auto seq = std::make_unique<Sequence>();
    seq->seq_id = next_seq_id_++;
    seq->prompt_len = prompt_len;
    const int32_t base = first_token >= 0 ? first_token : static_cast<int32_t>(g->arrival * 1000);
    for (int64_t i = 0; i < prompt_len; ++i) seq->tokens.push_back(base + static_cast<int32_t>(i));
    g->seqs.push_back(std::move(seq));
    scheduler_->Add(g.get());
    output_len_[g.get()] = output_len;
    groups_.push_back(std::move(g));
    return groups_.back().get();
  }

  // Add for a group whose LoRA adapter `adapter` moves in and out of the slots (queued after
  // Add: the scheduler reads the adapter when admitting).
  SequenceGroup* AddWithAdapter(int32_t adapter, int64_t prompt_len, int64_t output_len,
                                int32_t n = 1, int32_t first_token = -1, int32_t priority = 0) {
    SequenceGroup* g = Add(prompt_len, output_len, n, first_token, priority);
    g->adapter = adapter;
    g->adapter_swaps = true;
    return g;
  }

  static bool Has(const SchedulerOutput& out, const SequenceGroup* g) {
    return std::any_of(out.seqs.begin(), out.seqs.end(),
                       [g](const ScheduledSeq& s) { return s.group == g; });
  }

  void Remove(SequenceGroup* g) {
    scheduler_->Remove(g);
    Forget(g);
  }
  // Drops a group the scheduler no longer holds.
  void Forget(SequenceGroup* g) {
    output_len_.erase(g);
    groups_.erase(
        std::find_if(groups_.begin(), groups_.end(), [g](const auto& p) { return p.get() == g; }));
  }

  // One engine step, decided as the engine decides it and applied by Scheduler::Update. Returns
  // a copy of what was scheduled.
  SchedulerOutput Step() {
    SchedulerOutput out = scheduler_->Schedule();
    StepResult result;
    for (const ScheduledSeq& s : out.seqs) {
      if (s.group->ScoresPrompt()) {  // the chunk's positions' logits score the next tokens
        EXPECT_LE(s.seq->num_computed, s.group->next_prompt_logprob - 1)
            << "a position to score was skipped";
        s.group->next_prompt_logprob =
            std::min(s.seq->prompt_len, s.seq->num_computed + s.num_tokens + 1);
      }
      if (!s.sample) continue;
      SequenceGroup* g = s.group;
      std::vector<Sequence*> family = {s.seq};
      if (!g->forked && g->max_seqs > 1) {
        for (int32_t i = 1; i < g->max_seqs; ++i) {
          auto child = std::make_unique<Sequence>();
          child->seq_id = next_seq_id_++;
          child->sample_index = i;
          child->prompt_len = s.seq->prompt_len;
          child->tokens = s.seq->tokens;
          family.push_back(child.get());
          result.forks.push_back({g, s.seq, std::move(child)});
        }
      }
      for (Sequence* seq : family) {
        result.appends.push_back({seq, 7 + seq->sample_index});  // samples diverge: copy-on-write
        if (seq->num_output() + 1 >= output_len_[g]) result.finishes.push_back({g, seq, false});
      }
    }
    std::vector<SequenceGroup*> finished;
    scheduler_->Update(out, &result, &finished);
    for (SequenceGroup* g : finished) Forget(g);
    return out;
  }

  // Runs until every group finished; false if it takes more than `max_steps`.
  bool RunToCompletion(int max_steps = 100000) {
    for (int i = 0; i < max_steps && !groups_.empty(); ++i) {
      Step();
      CheckInvariants();
      if (HasFailure()) return false;
    }
    if (!groups_.empty()) {
      ADD_FAILURE() << groups_.size() << " groups left: " << scheduler_->num_waiting()
                    << " waiting, " << scheduler_->num_running() << " running, "
                    << scheduler_->num_swapped() << " swapped; free device blocks "
                    << bm_->NumFreeDeviceBlocks();
    }
    return groups_.empty();
  }

  // Queue membership matches block residency, block accounting matches the tables.
  void CheckInvariants() const {
    std::set<int32_t> device, swap;
    int64_t waiting = 0, running = 0, swapped = 0;
    for (const auto& g : groups_) {
      for (const auto& seq : g->seqs) {
        const bool has = bm_->HasSequence(seq->seq_id);
        if (g->state == GroupState::kWaiting) {
          ASSERT_FALSE(has) << "waiting sequence " << seq->seq_id << " holds blocks";
          ASSERT_EQ(seq->num_computed, 0);
          continue;
        }
        ASSERT_TRUE(has) << "resident sequence " << seq->seq_id << " has no blocks";
        ASSERT_EQ(bm_->IsSwapped(seq->seq_id), g->state == GroupState::kSwapped);
        ASSERT_LE(bm_->NumTokens(seq->seq_id), static_cast<int64_t>(seq->tokens.size()));
        ASSERT_LE(seq->num_computed, bm_->NumTokens(seq->seq_id));
        const auto& table = bm_->BlockTable(seq->seq_id);
        ASSERT_EQ(static_cast<int64_t>(table.size()),
                  (bm_->NumTokens(seq->seq_id) + config_.block_size - 1) / config_.block_size);
        for (int32_t b : table) (g->state == GroupState::kSwapped ? swap : device).insert(b);
      }
      waiting += g->state == GroupState::kWaiting;
      running += g->state == GroupState::kRunning;
      swapped += g->state == GroupState::kSwapped;
    }
    ASSERT_EQ(waiting, scheduler_->num_waiting());
    // Every running group ranks before every swapped one (the scheduler's swap-in relies on it).
    auto rank = [this](const SequenceGroup* g) {
      return std::make_pair(config_.policy == SchedulingPolicy::kPriority ? g->params.priority : 0,
                            g->arrival);
    };
    for (const auto& r : groups_) {
      for (const auto& w : groups_) {
        if (r->state == GroupState::kRunning && w->state == GroupState::kSwapped) {
          ASSERT_LT(rank(r.get()), rank(w.get()))
              << r->request_id << " runs, " << w->request_id << " is swapped out";
        }
      }
    }
    ASSERT_EQ(running, scheduler_->num_running());
    std::set<int32_t> moving;  // moving adapters of running groups: at most the slots
    for (const auto& g : groups_) {
      if (g->state == GroupState::kRunning && g->adapter_swaps) moving.insert(g->adapter);
    }
    ASSERT_LE(static_cast<int64_t>(moving.size()), config_.lora_slots);
    ASSERT_EQ(swapped, scheduler_->num_swapped());
    const BlockManager::Stats s = bm_->GetStats();
    ASSERT_EQ(s.device_used, static_cast<int32_t>(device.size()));
    ASSERT_EQ(s.swap_used, static_cast<int32_t>(swap.size()));
    ASSERT_EQ(s.device_used + s.device_free, config_.device_blocks);
  }

  static int64_t Tokens(const SchedulerOutput& out) {
    int64_t n = 0;
    for (const ScheduledSeq& s : out.seqs) n += s.num_tokens;
    return n;
  }

  Config config_;
  std::unique_ptr<BlockManager> bm_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<SequenceGroup>> groups_;
  std::map<const SequenceGroup*, int64_t> output_len_;
  int64_t next_arrival_ = 0;
  int64_t next_seq_id_ = 0;
};

TEST_F(SchedulerTest, AdmitsInArrivalOrderAndDecodesEveryStep) {
  Init({});
  SequenceGroup* a = Add(5, 3);
  SequenceGroup* b = Add(9, 3);
  SchedulerOutput out = Step();
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[0].group, a);
  EXPECT_EQ(out.seqs[0].num_tokens, 5);
  EXPECT_EQ(out.seqs[1].group, b);
  EXPECT_TRUE(out.seqs[1].sample);
  out = Step();
  EXPECT_EQ(Tokens(out), 2);  // one decode token each
  EXPECT_TRUE(RunToCompletion());
  EXPECT_EQ(bm_->GetStats().device_used, 0);
}

TEST_F(SchedulerTest, ChunkedPrefillDoesNotStarveDecodes) {
  Init({.budget = 8});
  SequenceGroup* decoding = Add(3, 20);
  Step();  // its prompt
  SequenceGroup* longp = Add(30, 2);
  int chunks = 0;
  while (longp->seqs.front()->num_computed < 30) {
    const SchedulerOutput out = Step();
    ASSERT_LE(Tokens(out), 8);
    ASSERT_EQ(out.seqs.front().group, decoding) << "the running decode comes first";
    ASSERT_EQ(out.seqs.front().num_tokens, 1);
    ++chunks;
  }
  EXPECT_EQ(chunks, 5);  // 30 tokens at 7 per step (8 minus the decode)
  EXPECT_TRUE(RunToCompletion());
}

// Issue 9: a long prompt that arrived first no longer takes every step's whole budget until its
// prefill is done: new requests get in (and decode) meanwhile, and alone it takes the budget.
TEST_F(SchedulerTest, ALongPrefillLeavesRoomForOthers) {
  Init({.device_blocks = 256, .budget = 16, .long_prefill = 8});
  SequenceGroup* longp = Add(100, 2);
  SchedulerOutput out = Step();
  EXPECT_EQ(Tokens(out), 16) << "alone, the prompt takes the whole budget";
  SequenceGroup* shortp = Add(3, 5);
  out = Step();
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[0].group, longp);
  EXPECT_EQ(out.seqs[0].num_tokens, 8);
  EXPECT_EQ(out.seqs[1].group, shortp);
  EXPECT_TRUE(out.seqs[1].sample) << "the short prompt gets its first token in this step";
  EXPECT_TRUE(RunToCompletion());
  EXPECT_EQ(bm_->GetStats().device_used, 0);
}

TEST_F(SchedulerTest, AWaitingGroupDoesNotJumpAnEarlierOneThatDoesNotFit) {
  Init({.device_blocks = 8, .block_size = 4});
  Add(20, 4);                        // 5 blocks
  SequenceGroup* big = Add(16, 4);   // 4 blocks: does not fit beside the first
  SequenceGroup* small = Add(2, 2);  // 1 block: would fit, but arrived later
  Step();
  EXPECT_EQ(big->state, GroupState::kWaiting);
  EXPECT_EQ(small->state, GroupState::kWaiting);
  EXPECT_TRUE(RunToCompletion());
}

TEST_F(SchedulerTest, RecomputePreemptsTheLatestArrivalAndRequeuesItFirst) {
  Init({.device_blocks = 4, .block_size = 4, .mode = PreemptionMode::kRecompute});
  SequenceGroup* a = Add(4, 8);
  SequenceGroup* b = Add(4, 8);
  Step();  // both prompts: 1 block each
  Step();  // both append into a second block: 4 blocks used
  ASSERT_EQ(bm_->GetStats().device_used, 4);
  for (int i = 0; i < 3; ++i) Step();  // fill the second blocks
  const SchedulerOutput out = Step();  // both need a third block: b is preempted
  EXPECT_EQ(scheduler_->stats().preemptions_recompute, 1);
  EXPECT_EQ(b->state, GroupState::kWaiting);
  EXPECT_EQ(b->seqs.front()->num_computed, 0);
  EXPECT_EQ(a->state, GroupState::kRunning);
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].group, a);
  EXPECT_TRUE(RunToCompletion());
  EXPECT_GT(scheduler_->stats().computed_prompt_tokens, 8);  // b's prompt was computed twice
}

TEST_F(SchedulerTest, SwapPreemptionMovesTheGroupOutAndBackBeforeNewAdmissions) {
  Init({.device_blocks = 4, .swap_blocks = 8, .block_size = 4, .mode = PreemptionMode::kSwap});
  Add(4, 8);
  SequenceGroup* b = Add(4, 8);
  for (int i = 0; i < 6 && b->state != GroupState::kSwapped; ++i) Step();
  ASSERT_EQ(b->state, GroupState::kSwapped);
  const int64_t computed = b->seqs.front()->num_computed;
  EXPECT_GT(computed, 0);  // swapping keeps the computed KV
  SequenceGroup* late = Add(1, 1);
  for (int i = 0; i < 100; ++i) {
    Step();
    if (b->state != GroupState::kSwapped) break;
    ASSERT_EQ(late->state, GroupState::kWaiting) << "admitted while a group is swapped out";
  }
  EXPECT_GE(b->seqs.front()->num_computed, computed);  // nothing was recomputed
  EXPECT_TRUE(RunToCompletion());
  const SchedulerStats& s = scheduler_->stats();
  EXPECT_GE(s.preemptions_swap, 1);
  EXPECT_EQ(s.preemptions_recompute, 0);
  EXPECT_EQ(s.swapped_out_blocks, s.swapped_in_blocks);
}

TEST_F(SchedulerTest, AutoSwapsSharingGroupsAndRecomputesSingleSequences) {
  Init({.device_blocks = 10, .swap_blocks = 32, .block_size = 4, .mode = PreemptionMode::kAuto});
  Add(4, 12);           // single sequence, earliest: never the victim
  Add(4, 12, /*n=*/3);  // forks into 3: swapped when preempted
  EXPECT_TRUE(RunToCompletion());
  EXPECT_GE(scheduler_->stats().preemptions_swap, 1);
  EXPECT_EQ(scheduler_->stats().preemptions_recompute, 0);

  Init({.device_blocks = 6, .swap_blocks = 32, .block_size = 4, .mode = PreemptionMode::kAuto});
  Add(4, 12);
  Add(4, 12);  // single sequence: recomputed when preempted
  EXPECT_TRUE(RunToCompletion());
  EXPECT_GE(scheduler_->stats().preemptions_recompute, 1);
  EXPECT_EQ(scheduler_->stats().preemptions_swap, 0);
}

TEST_F(SchedulerTest, ASwapThatDoesNotFitFallsBackToRecompute) {
  // Together they need 4 + (1 + 3 * 3) blocks; recomputed, the group alone needs 3 * 4.
  Init({.device_blocks = 12, .swap_blocks = 1, .block_size = 4, .mode = PreemptionMode::kSwap});
  Add(4, 12);
  Add(4, 12, 3);
  EXPECT_TRUE(RunToCompletion());
  EXPECT_GE(scheduler_->stats().swap_fallbacks, 1);
  EXPECT_EQ(bm_->GetStats().swap_used, 0);
}

TEST_F(SchedulerTest, ParallelSamplesShareThePromptBlocks) {
  Init({.device_blocks = 64, .block_size = 4});
  SequenceGroup* g = Add(16, 4, /*n=*/4);
  Step();  // prompt: 4 blocks, then the fork
  ASSERT_EQ(g->seqs.size(), 4u);
  EXPECT_EQ(bm_->GetStats().device_used, 4);
  Step();  // each sample's token goes into its own new block; the prompt stays shared
  EXPECT_EQ(bm_->GetStats().device_used, 4 + 4);
  EXPECT_TRUE(RunToCompletion());
}

TEST_F(SchedulerTest, PrefixCacheHitsStartAdmittedSequencesComputed) {
  Init({.device_blocks = 64, .block_size = 4, .prefix_caching = true});
  Add(18, 2, 1, /*first_token=*/100);
  EXPECT_TRUE(RunToCompletion());
  SequenceGroup* again = Add(18, 2, 1, /*first_token=*/100);
  const SchedulerOutput out = Step();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].num_tokens, 2);  // 16 cached, 2 computed
  EXPECT_EQ(scheduler_->stats().prefix_cache_hit_tokens, 16);
  (void)again;
  EXPECT_TRUE(RunToCompletion());
}

TEST_F(SchedulerTest, PromptScoringComputesTheWholePromptWithinItsStepBudget) {
  Init({.device_blocks = 64, .block_size = 4, .prefix_caching = true, .max_scored = 6});
  Add(18, 2, 1, /*first_token=*/100);
  EXPECT_TRUE(RunToCompletion());
  // Prompt logprobs need every position's logits: the cached 16 tokens are computed again, at
  // most 6 prompt tokens a step, while an ordinary prompt takes the rest of the budget.
  SequenceGroup* scored = Add(18, 2, 1, /*first_token=*/100);
  scored->params.prompt_logprobs = 0;
  Add(10, 2);
  SchedulerOutput out = Step();
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[0].group, scored);
  EXPECT_EQ(out.seqs[0].num_tokens, 6);
  EXPECT_EQ(out.seqs[1].num_tokens, 10);
  EXPECT_EQ(scheduler_->stats().prefix_cache_hit_tokens, 0);
  EXPECT_EQ(Step().seqs[0].num_tokens, 6);
  out = Step();
  EXPECT_EQ(out.seqs[0].num_tokens, 6);
  EXPECT_TRUE(out.seqs[0].sample);
  EXPECT_FALSE(scored->ScoresPrompt());
  EXPECT_TRUE(RunToCompletion());
  // Its blocks fed the cache as usual; a request without prompt logprobs hits it.
  Add(18, 2, 1, /*first_token=*/100);
  EXPECT_EQ(Step().seqs[0].num_tokens, 2);
  EXPECT_EQ(scheduler_->stats().prefix_cache_hit_tokens, 16);
  EXPECT_TRUE(RunToCompletion());
}

TEST_F(SchedulerTest, SequenceCapLimitsAdmission) {
  Init({.max_seqs = 4});
  Add(3, 5, /*n=*/3);
  SequenceGroup* second = Add(3, 5, /*n=*/2);  // 3 + 2 > 4
  Step();
  EXPECT_EQ(second->state, GroupState::kWaiting);
  EXPECT_TRUE(RunToCompletion());
}

// Random arrivals, lengths, n, budgets, pool sizes and modes, with aborts in every state; the
// invariants hold after every step and everything finishes with all blocks free.
// Applies one step in which `seq` got `tokens` appended (the model's choices).
void Apply(Scheduler* scheduler, const SchedulerOutput& out, Sequence* seq,
           const std::vector<int32_t>& tokens) {
  StepResult result;
  for (int32_t t : tokens) result.appends.push_back({seq, t});
  std::vector<SequenceGroup*> finished;
  scheduler->Update(out, &result, &finished);
  EXPECT_TRUE(finished.empty());
}

TEST_F(SchedulerTest, DraftsUseTheBudgetLeftAndKeepWhatTheModelConfirms) {
  Init({.device_blocks = 8, .block_size = 4, .budget = 4});
  SequenceGroup* a = Add(6, 100);
  Step();
  Step();  // the prompt, and its first token
  Sequence* seq = a->seqs.front().get();
  ASSERT_EQ(seq->tokens.size(), 7u);
  seq->draft = {20, 21, 22, 23, 24};
  SchedulerOutput out = scheduler_->Schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].num_tokens, 4);  // its token and 3 drafted: the budget of 4
  EXPECT_EQ(out.seqs[0].num_draft, 3);
  EXPECT_EQ(seq->draft, (std::vector<int32_t>{20, 21, 22}));
  EXPECT_EQ(bm_->NumTokens(seq->seq_id), 10);
  // The model confirms 20 and 21, then chooses 99 where 22 was guessed.
  Apply(scheduler_.get(), out, seq, {20, 21, 99});
  EXPECT_EQ(seq->tokens.size(), 10u);
  EXPECT_EQ(seq->tokens.back(), 99);
  EXPECT_EQ(seq->num_computed, 9);            // 99 is still to compute
  EXPECT_EQ(bm_->NumTokens(seq->seq_id), 9);  // the slot of 22 came back
  EXPECT_TRUE(seq->draft.empty());
  EXPECT_EQ(scheduler_->stats().draft_tokens, 3);
  EXPECT_EQ(scheduler_->stats().accepted_tokens, 2);
  CheckInvariants();
  // All confirmed: the step's last sample follows the whole draft.
  seq->draft = {30, 31};
  out = scheduler_->Schedule();
  ASSERT_EQ(out.seqs[0].num_draft, 2);
  Apply(scheduler_.get(), out, seq, {30, 31, 32});
  EXPECT_EQ(seq->num_computed, 12);
  EXPECT_EQ(seq->tokens.size(), 13u);
  EXPECT_EQ(scheduler_->stats().accepted_tokens, 4);
  CheckInvariants();
  // None confirmed.
  seq->draft = {40};
  out = scheduler_->Schedule();
  Apply(scheduler_.get(), out, seq, {41});
  EXPECT_EQ(seq->num_computed, 13);
  EXPECT_EQ(bm_->NumTokens(seq->seq_id), 13);
  CheckInvariants();
}

TEST_F(SchedulerTest, DraftsNeverTakeWhatOthersNeed) {
  // Budget: a prompt waiting takes what the decode leaves, so the draft gets nothing.
  Init({.device_blocks = 16, .block_size = 4, .budget = 8});
  SequenceGroup* a = Add(4, 100);
  Step();
  Add(20, 5);
  a->seqs.front()->draft = {1, 2, 3};
  SchedulerOutput out = scheduler_->Schedule();
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[0].num_draft, 0);
  EXPECT_EQ(out.seqs[0].num_tokens, 1);
  EXPECT_TRUE(a->seqs.front()->draft.empty());
  EXPECT_EQ(Tokens(out), 8);
  Apply(scheduler_.get(), out, a->seqs.front().get(), {5});
  CheckInvariants();

  // Blocks: a draft needing a new block stops above the watermark's reserve.
  Init({.device_blocks = 4, .block_size = 4, .budget = 64, .watermark = 0.25});
  SequenceGroup* b = Add(11, 100);  // 3 blocks; the 4th is the watermark's
  Step();
  Sequence* seq = b->seqs.front().get();
  seq->draft = {1, 2, 3};
  out = scheduler_->Schedule();
  EXPECT_EQ(out.seqs[0].num_draft, 0);  // token 12 fills block 3; a draft needs block 4
  EXPECT_EQ(bm_->NumFreeDeviceBlocks(), 1);
  Apply(scheduler_.get(), out, seq, {5});
  CheckInvariants();
}

// --scheduling-policy priority: a smaller priority is admitted first, whatever the arrival;
// equal priorities go by arrival.
TEST_F(SchedulerTest, PriorityAdmitsTheSmallestPriorityFirst) {
  Init({.max_seqs = 1, .policy = SchedulingPolicy::kPriority});
  SequenceGroup* batch = Add(4, 2, 1, -1, /*priority=*/1);
  SequenceGroup* first = Add(4, 2, 1, -1, /*priority=*/0);
  SequenceGroup* second = Add(4, 2, 1, -1, /*priority=*/0);
  SequenceGroup* urgent = Add(4, 2, 1, -1, /*priority=*/-5);
  std::vector<SequenceGroup*> order;
  while (!groups_.empty()) {
    const SchedulerOutput out = Step();
    for (const ScheduledSeq& s : out.seqs) {
      if (order.empty() || order.back() != s.group) order.push_back(s.group);
    }
  }
  EXPECT_EQ(order, (std::vector<SequenceGroup*>{urgent, first, second, batch}));
}

// Out of blocks, the lowest priority is preempted (the latest arrival among equals), not the
// latest arrival overall.
TEST_F(SchedulerTest, PriorityPreemptsTheLowestPriorityFirst) {
  for (const SchedulingPolicy policy : {SchedulingPolicy::kFcfs, SchedulingPolicy::kPriority}) {
    SCOPED_TRACE(policy == SchedulingPolicy::kFcfs ? "fcfs" : "priority");
    Init({.device_blocks = 6,
          .block_size = 4,
          .mode = PreemptionMode::kRecompute,
          .policy = policy});
    const int32_t low = policy == SchedulingPolicy::kPriority ? 5 : 0;
    const int32_t high = policy == SchedulingPolicy::kPriority ? -1 : 0;
    SequenceGroup* a = Add(4, 12);
    SequenceGroup* b = Add(4, 12, 1, -1, low);
    SequenceGroup* c = Add(4, 12, 1, -1, high);
    for (int i = 0; i < 20 && scheduler_->stats().preemptions_recompute == 0; ++i) Step();
    ASSERT_EQ(scheduler_->stats().preemptions_recompute, 1);
    SequenceGroup* victim = policy == SchedulingPolicy::kPriority ? b : c;
    EXPECT_EQ(victim->state, GroupState::kWaiting);
    EXPECT_EQ(a->state, GroupState::kRunning);
    EXPECT_EQ((victim == b ? c : b)->state, GroupState::kRunning);
    EXPECT_TRUE(RunToCompletion());
  }
}

// Under fcfs nothing is admitted while a group is swapped out; under priority a waiting group
// that outranks the swapped one is, and one that does not still waits.
TEST_F(SchedulerTest, PriorityAdmitsWhatOutranksASwappedGroup) {
  Init({.device_blocks = 5,
        .swap_blocks = 8,
        .block_size = 4,
        .mode = PreemptionMode::kSwap,
        .policy = SchedulingPolicy::kPriority});
  Add(4, 8);
  SequenceGroup* b = Add(4, 8, 1, -1, /*priority=*/1);
  for (int i = 0; i < 8 && b->state != GroupState::kSwapped; ++i) Step();
  ASSERT_EQ(b->state, GroupState::kSwapped);
  SequenceGroup* later_low = Add(1, 3, 1, -1, /*priority=*/2);
  SequenceGroup* urgent = Add(1, 3, 1, -1, /*priority=*/0);
  Step();
  EXPECT_EQ(urgent->state, GroupState::kRunning) << "admitted ahead of the swapped group";
  EXPECT_EQ(b->state, GroupState::kSwapped);
  EXPECT_EQ(later_low->state, GroupState::kWaiting);
  EXPECT_TRUE(RunToCompletion());
  EXPECT_GE(scheduler_->stats().preemptions_swap, 1);
  EXPECT_EQ(bm_->GetStats().swap_used, 0);
}

TEST_F(SchedulerTest, AtMostLoraSlotsMovingAdaptersRunAtOnce) {
  Init({.lora_slots = 1});
  SequenceGroup* a = AddWithAdapter(0, 4, 3);
  SequenceGroup* b = AddWithAdapter(1, 4, 3);  // another adapter: no slot while a runs
  SequenceGroup* c = AddWithAdapter(0, 4, 3);  // a's adapter, queued with b: runs with a
  SequenceGroup* base = Add(4, 3);             // the base model passes b
  SequenceGroup* fixed = Add(4, 3);            // so does an adapter fixed in its slot
  fixed->adapter = 7;
  SchedulerOutput out = Step();
  EXPECT_TRUE(Has(out, a));
  EXPECT_FALSE(Has(out, b));
  EXPECT_TRUE(Has(out, c));
  EXPECT_TRUE(Has(out, base));
  EXPECT_TRUE(Has(out, fixed));
  EXPECT_EQ(b->state, GroupState::kWaiting);
  // Arrived after b was first passed over: a's adapter no longer takes it, so that a's requests
  // drain and b's turn comes.
  SequenceGroup* d = AddWithAdapter(0, 4, 3);
  SequenceGroup* later_base = Add(4, 3);
  out = Step();
  EXPECT_FALSE(Has(out, d));
  EXPECT_TRUE(Has(out, later_base));
  out = Step();  // a's and c's third token: they finish
  EXPECT_TRUE(Has(out, a));
  out = Step();
  EXPECT_TRUE(Has(out, b));
  EXPECT_FALSE(Has(out, d));
  EXPECT_TRUE(RunToCompletion());
}

TEST_F(SchedulerTest, GroupsOfOneMovingAdapterRunTogether) {
  Init({.lora_slots = 1});
  SequenceGroup* a = AddWithAdapter(3, 4, 5);
  SequenceGroup* b = AddWithAdapter(3, 4, 5);
  const SchedulerOutput out = Step();
  EXPECT_TRUE(Has(out, a));
  EXPECT_TRUE(Has(out, b));
  EXPECT_TRUE(RunToCompletion());
}

TEST_F(SchedulerTest, ASwappedGroupWhoseAdapterHasNoSlotWaitsAndHoldsBackAdmissions) {
  // One slot: a (adapter 0) runs; b (adapter 1) is swapped out; it comes back only once no
  // adapter-0 group runs, and nothing after it is admitted before (fcfs).
  Init({.device_blocks = 8,
        .swap_blocks = 16,
        .block_size = 4,
        .mode = PreemptionMode::kSwap,
        .lora_slots = 2});
  SequenceGroup* a = AddWithAdapter(0, 8, 12);
  SequenceGroup* b = AddWithAdapter(1, 8, 12);
  while (b->state != GroupState::kSwapped) {
    Step();
    ASSERT_FALSE(groups_.empty());
  }
  EXPECT_EQ(a->state, GroupState::kRunning);
  scheduler_->set_lora_slots(1);  // a fixed adapter's slot broke, say
  SequenceGroup* later = Add(2, 2);
  auto live = [this](const SequenceGroup* g) {
    return std::any_of(groups_.begin(), groups_.end(), [g](const auto& p) { return p.get() == g; });
  };
  while (live(a)) {
    EXPECT_EQ(a->state, GroupState::kRunning);
    Step();
    EXPECT_NE(b->state, GroupState::kRunning);
    EXPECT_EQ(later->state, GroupState::kWaiting);
  }
  EXPECT_TRUE(RunToCompletion());
}

TEST_F(SchedulerTest, RandomWorkloadsFinishWithoutLeaks) {
  std::mt19937 rng(42);
  const PreemptionMode modes[] = {PreemptionMode::kAuto, PreemptionMode::kRecompute,
                                  PreemptionMode::kSwap};
  int64_t preemptions = 0, aborts_by_state[3] = {0, 0, 0};
  for (int round = 0; round < 60; ++round) {
    Config c;
    c.block_size = 1 + static_cast<int32_t>(rng() % 8);
    c.device_blocks = 24 + static_cast<int32_t>(rng() % 40);
    c.swap_blocks = static_cast<int32_t>(rng() % 40);
    c.budget = 4 + static_cast<int64_t>(rng() % 64);
    c.max_seqs = 4 + static_cast<int64_t>(rng() % 12);
    c.mode = modes[round % 3];
    c.prefix_caching = rng() % 2 == 0;
    c.watermark = (rng() % 3) * 0.02;
    c.max_scored = 1 + static_cast<int64_t>(rng() % 16);
    c.policy = round % 2 == 0 ? SchedulingPolicy::kFcfs : SchedulingPolicy::kPriority;
    c.lora_slots = 1 + static_cast<int64_t>(rng() % 3);
    Init(c);
    // A group must fit alone with each sequence recomputed separately (the engine checks this
    // at AddRequest): n * blocks(prompt + output) <= the pool above the watermark.
    const int64_t usable = c.device_blocks - static_cast<int64_t>(c.watermark * c.device_blocks);
    for (int step = 0; step < 400; ++step) {
      if (rng() % 3 == 0) {
        const int32_t n = 1 + static_cast<int32_t>(rng() % 3);
        const int64_t max_total = (usable / n) * c.block_size;
        const int64_t out = 1 + static_cast<int64_t>(rng() % std::min<int64_t>(24, max_total / 2));
        const int64_t prompt =
            1 + static_cast<int64_t>(rng() % std::min<int64_t>(40, max_total - out));
        // Shared prefixes: half of the prompts start with the same tokens.
        SequenceGroup* g = Add(prompt, out, n, rng() % 2 == 0 ? 5 : -1,
                               c.policy == SchedulingPolicy::kPriority ? rng() % 3 : 0);
        if (rng() % 4 == 0) g->params.prompt_logprobs = 1;  // no cache hits, capped chunks
        if (rng() % 2 == 0) {                               // one of 5 moving adapters
          g->adapter = static_cast<int32_t>(rng() % 5);
          g->adapter_swaps = true;
        }
      }
      if (!groups_.empty() && rng() % 10 == 0) {
        SequenceGroup* g = groups_[rng() % groups_.size()].get();
        ++aborts_by_state[static_cast<int>(g->state)];
        Remove(g);
      }
      Step();
      ASSERT_NO_FATAL_FAILURE(CheckInvariants()) << "round " << round << " step " << step;
    }
    ASSERT_TRUE(RunToCompletion()) << "round " << round;
    EXPECT_EQ(bm_->GetStats().device_used, 0);
    EXPECT_EQ(bm_->GetStats().swap_used, 0);
    preemptions += scheduler_->stats().preemptions_recompute + scheduler_->stats().preemptions_swap;
  }
  EXPECT_GT(preemptions, 100);
  for (int64_t n : aborts_by_state) EXPECT_GT(n, 0);  // waiting, running and swapped
}

}  // namespace
}  // namespace pagellm
