#include "worker/engine/step_cost_model.h"

#include <random>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

TEST(StepCostModelTest, TheFixedCostInTokensOfALinearCost) {
  StepCostModel m(/*prior_free_tokens=*/4);
  // 5 ms a step plus 1 ms a token: the fixed cost is worth 5 tokens.
  for (int i = 0; i < 200; ++i) m.Observe(1 + i % 16, 0.005 + 0.001 * (1 + i % 16));
  EXPECT_NEAR(m.free_tokens(), 5.0, 1e-6);
}

TEST(StepCostModelTest, FollowsAChangeAndToleratesNoise) {
  StepCostModel m(4);
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0, 0.0002);
  for (int i = 0; i < 400; ++i) m.Observe(1 + i % 16, 0.005 + 0.001 * (1 + i % 16) + noise(rng));
  EXPECT_NEAR(m.free_tokens(), 5.0, 0.5);
  // A cheaper step (2 ms fixed) takes over within a few half-lives.
  for (int i = 0; i < 2000; ++i) m.Observe(1 + i % 16, 0.002 + 0.001 * (1 + i % 16));
  EXPECT_NEAR(m.free_tokens(), 2.0, 0.2);
}

TEST(StepCostModelTest, KeepsThePriorWithoutAFit) {
  StepCostModel m(7);
  EXPECT_EQ(m.free_tokens(), 7);
  for (int i = 0; i < 100; ++i) m.Observe(8, 0.01);  // one size: no slope
  EXPECT_EQ(m.free_tokens(), 7);
  StepCostModel shrinking(7);  // bigger steps faster: not a cost
  for (int i = 0; i < 100; ++i) shrinking.Observe(1 + i % 8, 0.02 - 0.001 * (i % 8));
  EXPECT_EQ(shrinking.free_tokens(), 7);
  StepCostModel flat(7);  // no fixed cost: nothing is free
  for (int i = 0; i < 100; ++i) flat.Observe(1 + i % 8, 0.001 * (1 + i % 8));
  EXPECT_NEAR(flat.free_tokens(), 0, 1e-6);
}

TEST(StepCostModelTest, DraftingPaysWhenAcceptanceBeatsTheStepsShareOfPerTokenWork) {
  // One sequence decoding where the fixed cost is worth 4 tokens: 1 / 5 of the step is per
  // token, so a draft confirmed one time in four pays and one in six does not.
  EXPECT_TRUE(DraftPays(0.25, 1, 4.0));
  EXPECT_FALSE(DraftPays(1.0 / 6, 1, 4.0));
  // 64 sequences: 64 / 68 of the step is per-token work.
  EXPECT_FALSE(DraftPays(0.9, 64, 4.0));
  EXPECT_TRUE(DraftPays(0.95, 64, 4.0));
  // A GPU-like step, fixed cost worth 256 tokens: at 64 sequences a draft in four pays.
  EXPECT_TRUE(DraftPays(0.21, 64, 256.0));
  EXPECT_FALSE(DraftPays(0.19, 64, 256.0));
}

}  // namespace
}  // namespace pagellm
