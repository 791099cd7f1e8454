#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm::kernels {
namespace {

// Distance in units in the last place between two finite positive floats.
int64_t UlpDistance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

TEST(ExpApproxTest, WithinTwoUlpOfTheCorrectlyRoundedExp) {
  int64_t worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0013f) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    const int64_t d = UlpDistance(ExpApprox(x), want);
    worst = std::max(worst, d);
    ASSERT_LE(d, 2) << "x = " << x;
  }
  EXPECT_EQ(ExpApprox(0.0f), 1.0f);
  std::printf("worst error %lld ulp\n", static_cast<long long>(worst));
}

TEST(ExpApproxTest, ClampsOutsideTheNormalRange) {
  EXPECT_EQ(ExpApprox(-1000.0f), ExpApprox(-87.3f));
  EXPECT_GT(ExpApprox(-1000.0f), 0.0f);
  EXPECT_EQ(ExpApprox(1000.0f), ExpApprox(88.3f));
  EXPECT_TRUE(std::isfinite(ExpApprox(std::numeric_limits<float>::infinity())));
}

std::vector<float> GateUp(int64_t rows, int64_t inter) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> v(rows * 2 * inter);
  for (float& x : v) x = dist(rng);
  v[0] = 0.0f;
  v[1] = -0.0f;
  v[2] = -200.0f;  // silu -> -0
  v[3] = 200.0f;   // silu -> 200
  return v;
}

TEST(SiluMulTest, MatchesTheDefinition) {
  const int64_t rows = 3, inter = 45;
  const std::vector<float> gu = GateUp(rows, inter);
  std::vector<float> out(rows * inter);
  SiluMul(gu.data(), rows, inter, out.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
      const double want = g / (1.0 + std::exp(-g)) * u;
      EXPECT_NEAR(out[r * inter + i], want, 1e-6 * std::fabs(want) + 1e-30) << r << "," << i;
    }
  }
  EXPECT_EQ(out[3], 200.0f * gu[inter + 3]);
}

TEST(SiluMulTest, InPlaceOverTheGateEqualsSeparateOutput) {
  const int64_t rows = 3, inter = 45;
  std::vector<float> gu = GateUp(rows, inter);
  std::vector<float> out(rows * inter);
  SiluMul(gu.data(), rows, inter, out.data());
  for (int64_t r = 0; r < rows; ++r) {
    SiluMul(gu.data() + r * 2 * inter, 1, inter, gu.data() + r * 2 * inter);
    EXPECT_EQ(0,
              std::memcmp(gu.data() + r * 2 * inter, out.data() + r * inter, inter * sizeof(float)))
        << r;
  }
}

TEST(SiluMulTest, Avx512AndPortableAreBitIdentical) {
  const int64_t rows = 4, inter = 1536 + 7;  // a tail past the 16-lane loop
  const std::vector<float> gu = GateUp(rows, inter);
  std::vector<float> a(rows * inter), b(rows * inter);
  internal::SiluMulPortable(gu.data(), rows, inter, a.data());
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512 on this CPU";
  internal::SiluMulAvx512(gu.data(), rows, inter, b.data());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(SiluMulTest, Avx2AndPortableAreBitIdentical) {
  const int64_t rows = 4, inter = 1536 + 7;  // a tail past the 8-lane loop
  const std::vector<float> gu = GateUp(rows, inter);
  std::vector<float> a(rows * inter), b(rows * inter);
  internal::SiluMulPortable(gu.data(), rows, inter, a.data());
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    GTEST_SKIP() << "no AVX2 on this CPU";
  internal::SiluMulAvx2(gu.data(), rows, inter, b.data());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

// Softmax rows: probabilities within a few ulp of the double-precision definition, and the same
// bits from both forms, for every length from 1 to 70 (full vectors and masked tails) and rows
// that sit at a stride.
TEST(SoftmaxRowsTest, MatchesTheDefinitionAndBothFormsAgree) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int64_t n = 1; n <= 70; ++n) {
    const int64_t rows = 3, ld = n + 3;
    std::vector<float> x(rows * ld);
    for (float& v : x) v = dist(rng);
    std::vector<float> a = x, b = x;
    internal::SoftmaxRowsPortable(a.data(), rows, n, ld);
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = x.data() + r * ld;
      float mx = in[0];
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, in[i]);
      // The definition on the float differences (their rounding is the input's, not the kernel's).
      auto e = [&](int64_t i) { return std::exp(static_cast<double>(in[i] - mx)); };
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += e(i);
      for (int64_t i = 0; i < n; ++i) {
        const double want = e(i) / sum;
        EXPECT_NEAR(a[r * ld + i], want, 4e-7 * want + 1e-30) << n << " " << r << " " << i;
      }
      for (int64_t i = n; i < ld; ++i) EXPECT_EQ(x[r * ld + i], a[r * ld + i]) << "past the row";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      std::vector<float> c = x;
      internal::SoftmaxRowsAvx2(c.data(), rows, n, ld);
      EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float))) << "AVX2 " << n;
    }
    if (!__builtin_cpu_supports("avx512f")) continue;
    internal::SoftmaxRowsAvx512(b.data(), rows, n, ld);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << n;
  }
}

}  // namespace
}  // namespace pagellm::kernels
