#include "worker/engine/beam_search.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

TEST(BeamSearchTest, EosWithinTopKClosesAHypothesisAndOthersRun) {
  // k = 2: ranks 0..3. EOS (id 9) at rank 1 closes a hypothesis; EOS at rank 3 is ignored.
  std::vector<BeamCandidate> c = {
      {0, 5, -1.0}, {0, 9, -1.5}, {1, 6, -2.0}, {1, 9, -2.5}, {1, 7, -3.0}};
  const std::vector<int32_t> eos = {9};
  const BeamStep step = SelectBeams(&c, 2, eos);
  ASSERT_EQ(step.finished.size(), 1u);
  EXPECT_EQ(step.finished[0].beam, 0);
  ASSERT_EQ(step.running.size(), 2u);
  EXPECT_EQ(step.running[0].token, 5);
  EXPECT_EQ(step.running[1].token, 6);
}

TEST(BeamSearchTest, TiesBreakByBeamThenToken) {
  std::vector<BeamCandidate> c = {{1, 2, -1.0}, {0, 4, -1.0}, {0, 3, -1.0}};
  const BeamStep step = SelectBeams(&c, 2, {});
  ASSERT_EQ(step.running.size(), 2u);
  EXPECT_EQ(step.running[0].token, 3);
  EXPECT_EQ(step.running[1].token, 4);
}

TEST(BeamSearchTest, DoneWhenNoRunningBeamCanBeatTheWorstHypothesis) {
  const std::vector<double> hyps = {-1.0, -2.0};
  EXPECT_FALSE(BeamSearchDone(std::vector<double>{-1.0}, 2, false, -0.1, 1, 1.0));  // too few
  EXPECT_TRUE(BeamSearchDone(hyps, 2, true, -0.1, 1, 1.0));                         // early stop
  EXPECT_FALSE(BeamSearchDone(hyps, 2, false, -3.0, 2, 1.0));                       // -1.5 beats -2
  EXPECT_TRUE(BeamSearchDone(hyps, 2, false, -5.0, 2, 1.0));                        // -2.5 does not
  EXPECT_DOUBLE_EQ(BeamScore(-6.0, 3, 1.0), -2.0);
  EXPECT_DOUBLE_EQ(BeamScore(-6.0, 0, 1.0), -6.0);  // length at least 1
}

}  // namespace
}  // namespace pagellm
