#include "worker/backend/penalty_history.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

using Visits = std::vector<std::pair<int32_t, int32_t>>;

Visits Collect(PenaltyHistory& h, const SequenceToSample& seq, absl::Status* status) {
  Visits v;
  *status = h.ForEach(seq, [&](int32_t id, int32_t count) { v.emplace_back(id, count); });
  return v;
}

TEST(PenaltyHistoryTest, EachIdOnceWithItsOutputCountInFirstSeenOrder) {
  PenaltyHistory h(100);
  const std::vector<int32_t> prompt = {7, 3, 7, 50}, output = {3, 9, 3, 3, 9};
  const SamplingParams repetition{.repetition_penalty = 1.2f};
  const SamplingParams frequency{.frequency_penalty = 0.5f};
  absl::Status s;
  EXPECT_EQ(Collect(h, {.params = &repetition, .prompt_ids = prompt, .output_ids = output}, &s),
            (Visits{{7, 0}, {3, 3}, {50, 0}, {9, 2}}));
  EXPECT_TRUE(s.ok());
  // Without a repetition penalty the prompt does not count.
  EXPECT_EQ(Collect(h, {.params = &frequency, .prompt_ids = prompt, .output_ids = output}, &s),
            (Visits{{3, 3}, {9, 2}}));
}

TEST(PenaltyHistoryTest, AnIdOutsideTheVocabularyVisitsNothingAndLeavesNoState) {
  PenaltyHistory h(10);
  const SamplingParams p{.presence_penalty = 1.0f};
  const std::vector<int32_t> bad = {1, 2, 10}, good = {1};
  absl::Status s;
  EXPECT_TRUE(Collect(h, {.params = &p, .output_ids = bad}, &s).empty());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Collect(h, {.params = &p, .output_ids = good}, &s), (Visits{{1, 1}}));
  EXPECT_TRUE(s.ok());
}

}  // namespace
}  // namespace pagellm
