#include "tools/bench/arrival_schedule.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace pagellm::bench {
namespace {

ArrivalOptions Rate(double rate, double burstiness = 1.0, uint64_t seed = 3) {
  ArrivalOptions o;
  o.request_rate = rate;
  o.burstiness = burstiness;
  o.seed = seed;
  return o;
}

// Mean and coefficient of variation of the gaps, in seconds.
std::pair<double, double> GapMeanAndCv(const std::vector<int64_t>& t) {
  double sum = 0, sq = 0;
  const double n = static_cast<double>(t.size() - 1);
  for (size_t i = 1; i < t.size(); ++i) sum += (t[i] - t[i - 1]) * 1e-9;
  const double mean = sum / n;
  for (size_t i = 1; i < t.size(); ++i) {
    const double g = (t[i] - t[i - 1]) * 1e-9;
    sq += (g - mean) * (g - mean);
  }
  return {mean, std::sqrt(sq / n) / mean};
}

TEST(ArrivalScheduleTest, InfiniteRateSendsEverythingAtOnce) {
  auto t = ArrivalOffsets(5, Rate(std::numeric_limits<double>::infinity()));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, std::vector<int64_t>(5, 0));
}

TEST(ArrivalScheduleTest, PoissonGapsHaveMeanOneOverRate) {
  auto t = ArrivalOffsets(20001, Rate(50.0));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0], 0);
  for (size_t i = 1; i < t->size(); ++i) ASSERT_GE((*t)[i], (*t)[i - 1]);
  auto [mean, cv] = GapMeanAndCv(*t);
  EXPECT_NEAR(mean, 1.0 / 50, 0.02 / 50);
  EXPECT_NEAR(cv, 1.0, 0.03);  // exponential gaps
}

TEST(ArrivalScheduleTest, BurstinessIsTheGammaShape) {
  // Gamma(k) gaps have CV 1/sqrt(k); the mean stays 1 / rate.
  for (double k : {0.25, 4.0, 100.0}) {
    auto t = ArrivalOffsets(20001, Rate(10.0, k));
    ASSERT_TRUE(t.ok());
    auto [mean, cv] = GapMeanAndCv(*t);
    EXPECT_NEAR(mean, 0.1, 0.1 * 0.05) << k;
    EXPECT_NEAR(cv, 1.0 / std::sqrt(k), 0.05 / std::sqrt(k)) << k;
  }
}

TEST(ArrivalScheduleTest, SameSeedSameSchedule) {
  EXPECT_EQ(*ArrivalOffsets(100, Rate(5, 1, 9)), *ArrivalOffsets(100, Rate(5, 1, 9)));
  EXPECT_NE(*ArrivalOffsets(100, Rate(5, 1, 9)), *ArrivalOffsets(100, Rate(5, 1, 10)));
}

TEST(ArrivalScheduleTest, RejectsNonPositiveRateOrBurstiness) {
  EXPECT_FALSE(ArrivalOffsets(3, Rate(0)).ok());
  EXPECT_FALSE(ArrivalOffsets(3, Rate(-1)).ok());
  EXPECT_FALSE(ArrivalOffsets(3, Rate(1, 0)).ok());
  EXPECT_FALSE(ArrivalOffsets(3, Rate(std::nan(""))).ok());
}

}  // namespace
}  // namespace pagellm::bench
