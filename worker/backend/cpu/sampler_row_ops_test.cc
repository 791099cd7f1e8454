#include "worker/backend/cpu/sampler_row_ops.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm::row_ops {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Sizes around the 8-float groups and kBlock-id blocks.
constexpr int64_t kSizes[] = {0, 1, 7, 8, 9, 31, 511, 512, 513, 1500};

std::vector<float> Random(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

TEST(RowOpsTest, ExpNonPositiveIsAccurate) {
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.000731f) {
    const double expected = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(ExpNonPositive(x) - expected) / expected);
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(ExpNonPositive(0.0f), 1.0f);
  EXPECT_EQ(ExpNonPositive(-kInf), 0.0f);
  EXPECT_EQ(ExpNonPositive(-88.0f), 0.0f);
}

TEST(RowOpsTest, ScanPeakFindsLowestIdOfMaximumAndNan) {
  for (int64_t n : kSizes) {
    if (n == 0) {
      EXPECT_EQ(ScanPeak(nullptr, 0).id, -1);
      continue;
    }
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
      std::vector<float> x = Random(n, 1, -5, 5);
      x[at] = 10.0f;
      if (at + 3 < n) x[at + 3] = 10.0f;  // A later tie loses.
      RowPeak peak = ScanPeak(x.data(), n);
      EXPECT_EQ(peak.value, 10.0f);
      EXPECT_EQ(peak.id, at) << "n=" << n;
      EXPECT_FALSE(peak.has_nan);
      x[n - 1] = NAN;  // In the padded tail group too.
      EXPECT_TRUE(ScanPeak(x.data(), n).has_nan) << "n=" << n;
    }
    std::vector<float> none(n, -kInf);
    EXPECT_EQ(ScanPeak(none.data(), n).id, -1);
  }
}

TEST(RowOpsTest, ExpBlocksMatchesScalarReference) {
  for (int64_t n : kSizes) {
    std::vector<float> w = Random(n, 2, -30, 0);
    if (n > 3) w[3] = -kInf;
    const float max = 0.0f, inv_t = 1.7f;
    std::vector<float> p(n);
    std::vector<double> blocks((n + kBlock - 1) / kBlock), levels(kNumKeyLevels);
    ExpBlocks(w.data(), n, max, inv_t, p.data(), blocks.data(), levels.data());
    std::vector<double> want_blocks(blocks.size()), want_levels(kNumKeyLevels);
    for (int64_t i = 0; i < n; ++i) {
      const float key = (max - w[i]) * inv_t;
      ASSERT_EQ(p[i], ExpNonPositive(-key)) << "n=" << n << " i=" << i;
      want_blocks[i / kBlock] += p[i];
      for (int l = 0; l < kNumKeyLevels; ++l) {
        if (key < kKeyLevels[l]) want_levels[l] += p[i];
      }
    }
    for (size_t b = 0; b < blocks.size(); ++b) {
      EXPECT_NEAR(blocks[b], want_blocks[b], 1e-6 * want_blocks[b]) << "n=" << n;
    }
    for (int l = 0; l < kNumKeyLevels; ++l) {
      EXPECT_NEAR(levels[l], want_levels[l], 1e-6 * want_levels[l] + 1e-30) << "n=" << n;
    }
    std::vector<float> p2(n);
    ExpBlocks(w.data(), n, max, inv_t, p2.data(), blocks.data(), nullptr);
    EXPECT_EQ(p2, p);
  }
}

TEST(RowOpsTest, ZeroBelowAndCountsMatchScalarReference) {
  for (int64_t n : kSizes) {
    std::vector<float> x = Random(n, 3, 0, 1);
    std::vector<double> blocks((n + kBlock - 1) / kBlock);
    int32_t greater = 0;
    for (float v : x) greater += v > 0.4f;
    EXPECT_EQ(CountGreater(x.data(), n, 0.4f), greater);

    std::vector<float> zeroed = x;
    ZeroBelow(zeroed.data(), n, 0.4f, blocks.data());
    std::vector<double> want(blocks.size());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(zeroed[i], x[i] < 0.4f ? 0.0f : x[i]);
      want[i / kBlock] += zeroed[i];
    }
    for (size_t b = 0; b < blocks.size(); ++b) EXPECT_NEAR(blocks[b], want[b], 1e-6 * want[b]);
  }
}

TEST(RowOpsTest, CollectAndFindMatchScalarReference) {
  for (int64_t n : kSizes) {
    std::vector<float> w = Random(n, 4, -10, 0);
    std::vector<int32_t> out(n), want;
    for (int64_t i = 0; i < n; ++i) {
      if ((0.0f - w[i]) * 0.5f < 1.0f) want.push_back(static_cast<int32_t>(i));
    }
    const int32_t count =
        CollectBelowKey(w.data(), static_cast<int32_t>(n), 0.0f, 0.5f, 1.0f, out.data());
    out.resize(count);
    EXPECT_EQ(out, want) << "n=" << n;

    for (int64_t from = 0; from <= n; from += 3) {
      int64_t expected = from;
      while (expected < n && !(w[expected] > -1.0f)) ++expected;
      EXPECT_EQ(FindNextAbove(w.data(), from, n, -1.0f), expected) << "n=" << n;
    }
  }
}

}  // namespace
}  // namespace pagellm::row_ops
