#include "worker/backend/forward_batch.h"

#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;

// Two sequences in a pool of 8 blocks of 4 slots: row 0 prefills positions 0..4 (blocks 5, 2),
// row 1 decodes position 6 (blocks 1, 7). Block table stride 3.
struct Fixture {
  ForwardBatch Batch() {
    ForwardBatch b;
    b.num_tokens = static_cast<int64_t>(tokens_.size());
    b.token_ids = tokens_.data();
    b.positions = positions_.data();
    b.token_seq = token_seq_.data();
    b.slots = slots_.data();
    b.num_seqs = 2;
    b.query_start = query_start_.data();
    b.seq_lens = seq_lens_.data();
    b.block_tables = tables_.data();
    b.block_table_stride = 3;
    b.num_logits = static_cast<int64_t>(logits_.size());
    b.logit_indices = logits_.data();
    b.all_decode = false;
    return b;
  }
  absl::Status Validate(const ForwardBatch& b) { return ValidateForwardBatch(b, limits_); }

  const ForwardBatchLimits limits_{.max_batch_tokens = 16,
                                   .num_kv_blocks = 8,
                                   .block_size = 4,
                                   .vocab_size = 100,
                                   .max_position = 12,
                                   .num_adapters = 2};
  std::vector<int32_t> tokens_ = {10, 11, 12, 13, 14, 60};
  std::vector<int32_t> positions_ = {0, 1, 2, 3, 4, 6};
  std::vector<int32_t> token_seq_ = {0, 0, 0, 0, 0, 1};
  std::vector<int64_t> slots_ = {20, 21, 22, 23, 8, 30};
  std::vector<int32_t> query_start_ = {0, 5, 6};
  std::vector<int32_t> seq_lens_ = {5, 7};
  std::vector<int32_t> tables_ = {5, 2, 0, 1, 7, 0};
  std::vector<int32_t> logits_ = {4, 5};
  std::vector<int32_t> adapters_ = {1, -1};
};

TEST(ForwardBatchTest, AWellFormedBatchPasses) {
  Fixture f;
  EXPECT_TRUE(f.Validate(f.Batch()).ok());
  ForwardBatch with_adapters = f.Batch();
  with_adapters.seq_adapter = f.adapters_.data();
  EXPECT_TRUE(f.Validate(with_adapters).ok());
}

TEST(ForwardBatchTest, EachBrokenRequirementIsNamed) {
  struct Case {
    const char* what;
    // Applied to a fresh fixture and its batch (which points into the fixture's vectors).
    std::function<void(Fixture*, ForwardBatch*)> mutate;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"slot off its block table", [](auto* t, auto*) { t->slots_[4] = 9; }, "writes slot 9"},
      {"block id outside the pool", [](auto* t, auto*) { t->tables_[1] = 8; }, "block 1 is 8"},
      {"negative block id", [](auto* t, auto*) { t->tables_[3] = -1; }, "block 0 is -1"},
      {"a row's positions do not end at its length", [](auto* t, auto*) { t->seq_lens_[1] = 8; },
       "token 5 is (row 1, position 6)"},
      {"a token in the wrong row", [](auto* t, auto*) { t->token_seq_[4] = 1; }, "token 4"},
      {"token id outside the vocabulary", [](auto* t, auto*) { t->tokens_[0] = 100; }, "id 100"},
      {"longer than the context", [](auto* t, auto*) { t->seq_lens_[1] = 13; }, "length 13"},
      {"more blocks than the stride", [](auto*, auto* b) { b->block_table_stride = 1; },
       "the stride is 1"},
      {"query_start not covering the batch", [](auto* t, auto*) { t->query_start_[2] = 5; },
       "query_start"},
      {"an empty row", [](auto* t, auto*) { t->query_start_[1] = 0; }, "has no tokens"},
      {"logit indices out of order",
       [](auto* t, auto*) {
         t->logits_ = {5, 4};
       },
       "logit index 1"},
      {"logit index past the batch", [](auto* t, auto*) { t->logits_[1] = 6; }, "is 6"},
      {"too many tokens", [](auto*, auto* b) { b->num_tokens = 17; }, "17 tokens"},
      {"an adapter the backend does not serve",
       [](auto* t, auto* b) {
         t->adapters_[1] = 2;
         b->seq_adapter = t->adapters_.data();
       },
       "row 1 runs adapter 2 (2 served)"},
      {"a negative adapter other than -1",
       [](auto* t, auto* b) {
         t->adapters_[0] = -2;
         b->seq_adapter = t->adapters_.data();
       },
       "runs adapter -2"},
      {"a mixed batch flagged all-decode", [](auto*, auto* b) { b->all_decode = true; },
       "all_decode"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Fixture f;
    ForwardBatch b = f.Batch();
    c.mutate(&f, &b);
    const absl::Status st = f.Validate(b);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.message));
  }
}

TEST(ForwardBatchTest, AnAllDecodeBatchMustSaySo) {
  // Row 1 alone: one decode token whose logits are wanted.
  Fixture f;
  f.tokens_ = {60};
  f.positions_ = {6};
  f.token_seq_ = {0};
  f.slots_ = {30};
  f.query_start_ = {0, 1};
  f.seq_lens_ = {7};
  f.tables_ = {1, 7, 0};
  f.logits_ = {0};
  ForwardBatch b = f.Batch();
  b.num_seqs = 1;
  EXPECT_EQ(f.Validate(b).code(), absl::StatusCode::kInvalidArgument);
  b.all_decode = true;
  EXPECT_TRUE(f.Validate(b).ok()) << f.Validate(b);
}

}  // namespace
}  // namespace pagellm
