// StepArrays builds steps that meet forward_batch.h's contract.
#include "worker/backend/step_arrays.h"

#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

TEST(StepArraysTest, BuildsAValidMixedStep) {
  StepArrays s(/*block_size=*/4, /*block_table_stride=*/8);
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10}, next = {11}, blocks_a = {3, 1},
                             blocks_b = {0, 2, 4};
  s.AddRow(prompt, /*cached=*/0, blocks_a);
  s.AddRow(next, /*cached=*/8, blocks_b);
  const ForwardBatch b = s.batch();
  EXPECT_TRUE(ValidateForwardBatch(b, {64, 5, 4, 100, 128}).ok());
  EXPECT_EQ(b.num_tokens, 7);
  EXPECT_EQ(b.num_seqs, 2);
  EXPECT_EQ(b.slots[4], 1 * 4 + 0);  // position 4 of row 0: block 1, offset 0
  EXPECT_EQ(b.slots[6], 4 * 4 + 0);  // position 8 of row 1: block 4, offset 0
  EXPECT_EQ(b.seq_lens[1], 9);
  ASSERT_EQ(b.num_logits, 2);
  EXPECT_EQ(b.logit_indices[0], 5);
  EXPECT_EQ(b.logit_indices[1], 6);
  EXPECT_FALSE(b.all_decode);
}

TEST(StepArraysTest, LogitsForEveryPositionFromAPoint) {
  StepArrays s(16, 4);
  const std::vector<int32_t> tokens(10, 1), blocks = {0};
  s.AddRow(tokens, 0, blocks, /*logits_from=*/7);
  const ForwardBatch b = s.batch();
  ASSERT_EQ(b.num_logits, 3);
  EXPECT_EQ(b.logit_indices[0], 7);
  EXPECT_TRUE(ValidateForwardBatch(b, {64, 1, 16, 100, 128}).ok());
  s.Clear();
  EXPECT_EQ(s.batch().num_tokens, 0);
}

}  // namespace
}  // namespace pagellm
