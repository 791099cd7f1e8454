#include "kernels/cpu/bf16_matmul.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"

namespace pagellm::kernels {
namespace {

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Truncation toward the nearest bf16 by hand, independent of the kernel's packing: the top 16
// bits after adding half an ulp (ties to even).
float RoundToBf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  u += 0x7FFF + ((u >> 16) & 1);
  return std::bit_cast<float>(u & 0xFFFF0000u);
}

// One product on a chosen path.
void Path(const float* x, int64_t rows, const PackedBf16Matrix& p, float* y, ThreadPool* pool,
          bool vector) {
  const Bf16MatmulJob job{&p, y, p.n_out};
  internal::Bf16MatmulPath(&job, 1, x, rows, p.n_in, pool, vector);
}

// The same bits in a and b (n values).
void ExpectSameBits(const float* a, const float* b, int64_t n, const std::string& what) {
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << what << " " << i;
  }
}

// Each `step`-th row of x alone (rows = 1) gives the bits of its row in `batch`.
void ExpectRowsAloneMatch(const float* x, const PackedBf16Matrix& p, int64_t rows, int64_t step,
                          const std::vector<float>& batch, ThreadPool* pool) {
  std::vector<float> one(p.n_out);
  for (int64_t m = 0; m < rows; m += step) {
    Path(x + m * p.n_in, 1, p, one.data(), pool, true);
    ExpectSameBits(one.data(), batch.data() + m * p.n_out, p.n_out, "row " + std::to_string(m));
  }
}

struct Shape {
  int64_t rows, n, k;
};

class Bf16MatmulTest : public ::testing::TestWithParam<Shape> {};

// The layouts this CPU can run.
std::vector<Bf16Layout> RunnableLayouts() {
  const CpuFeatures& cpu = GetCpuFeatures();
  std::vector<Bf16Layout> layouts = {Bf16Layout::kLanes};
  if (cpu.avx512_bf16) layouts.push_back(Bf16Layout::kPairs);
  if (cpu.amx_bf16) layouts.push_back(Bf16Layout::kAmxTiles);
  return layouts;
}

// Against a double-precision sum over the rounded weights (and, for AMX and AVX512-BF16, the
// rounded activations): the fp32 accumulation error only. Every layout this CPU runs.
TEST_P(Bf16MatmulTest, MatchesDoubleReferenceOnRoundedWeights) {
  const Shape s = GetParam();
  std::mt19937 rng(7);
  const std::vector<float> w = Random(s.n * s.k, rng), x = Random(s.rows * s.k, rng);
  EXPECT_EQ(PackBf16Matrix(w.data(), s.n, s.k).layout, PreferredBf16Layout());
  for (const Bf16Layout layout : RunnableLayouts()) {
    SCOPED_TRACE(Bf16LayoutName(layout));
    const PackedBf16Matrix p = internal::PackBf16MatrixAs(w.data(), s.n, s.k, layout);
    const bool round_x = layout != Bf16Layout::kLanes;
    EXPECT_EQ(p.n_out, s.n);
    EXPECT_EQ(p.panels(), (s.n + 31) / 32);
    const int64_t ldy = s.n + 3;
    std::vector<float> y(s.rows * ldy, -7.0f);
    ThreadPool pool(2);
    Bf16Matmul(x.data(), s.rows, s.k, p, y.data(), ldy, &pool);
    for (int64_t m = 0; m < s.rows; ++m) {
      for (int64_t n = 0; n < s.n; ++n) {
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < s.k; ++i) {
          const float xv = round_x ? RoundToBf16(x[m * s.k + i]) : x[m * s.k + i];
          const double t = static_cast<double>(xv) * RoundToBf16(w[n * s.k + i]);
          ref += t;
          mag += std::fabs(t);
        }
        ASSERT_NEAR(y[m * ldy + n], ref, 1e-6 * mag + 1e-6) << m << "," << n;
      }
      for (int64_t n = s.n; n < ldy; ++n) EXPECT_EQ(y[m * ldy + n], -7.0f) << "wrote past n_out";
    }
  }
}

// The lane layout: the AVX-512 and portable paths, and any thread count, give the same bits; so
// does a row alone and the same row inside a batch (batch invariance).
TEST_P(Bf16MatmulTest, PathsThreadsAndBatchingAreBitIdentical) {
  const Shape s = GetParam();
  std::mt19937 rng(11);
  const std::vector<float> w = Random(s.n * s.k, rng), x = Random(s.rows * s.k, rng);
  const PackedBf16Matrix p = internal::PackBf16MatrixAs(w.data(), s.n, s.k, Bf16Layout::kLanes);
  std::vector<float> portable(s.rows * s.n), vec(s.rows * s.n);
  ThreadPool pool(2);
  Path(x.data(), s.rows, p, portable.data(), nullptr, false);
  if (!GetCpuFeatures().avx2) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
  Path(x.data(), s.rows, p, vec.data(), &pool, true);
  ExpectSameBits(portable.data(), vec.data(), s.rows * s.n,
                 GetCpuFeatures().avx512 ? "portable vs AVX-512" : "portable vs AVX2");
  ExpectRowsAloneMatch(x.data(), p, s.rows, 5, vec, nullptr);
}

// AMX and AVX512-BF16: a row alone, the same row inside a batch (in any tile of rows) and any
// thread count give the same bits.
void ExpectBatchAndThreadInvariant(Bf16Layout layout, const Shape& s) {
  std::mt19937 rng(13);
  const std::vector<float> w = Random(s.n * s.k, rng), x = Random(s.rows * s.k, rng);
  const PackedBf16Matrix p = internal::PackBf16MatrixAs(w.data(), s.n, s.k, layout);
  std::vector<float> batch(s.rows * s.n), serial(s.rows * s.n);
  ThreadPool pool(2);
  Bf16Matmul(x.data(), s.rows, s.k, p, batch.data(), s.n, &pool);
  Bf16Matmul(x.data(), s.rows, s.k, p, serial.data(), s.n, nullptr);
  ExpectSameBits(batch.data(), serial.data(), s.rows * s.n, "2 threads vs 1");
  ExpectRowsAloneMatch(x.data(), p, s.rows, 3, batch, &pool);
}

TEST_P(Bf16MatmulTest, AmxIsBatchAndThreadInvariant) {
  if (!GetCpuFeatures().amx_bf16) GTEST_SKIP() << "no AMX (or not permitted) on this CPU";
  ExpectBatchAndThreadInvariant(Bf16Layout::kAmxTiles, GetParam());
}

TEST_P(Bf16MatmulTest, PairsAreBatchAndThreadInvariant) {
  if (!GetCpuFeatures().avx512_bf16) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  ExpectBatchAndThreadInvariant(Bf16Layout::kPairs, GetParam());
}

// Q, K and V in one region: each output as its own product gives it.
TEST_P(Bf16MatmulTest, ManyEqualsOneProductPerMatrix) {
  const Shape s = GetParam();
  std::mt19937 rng(17);
  const std::vector<float> x = Random(s.rows * s.k, rng);
  const int64_t n[3] = {s.n, 64, 7};
  std::vector<PackedBf16Matrix> w;
  for (int64_t ni : n) w.push_back(PackBf16Matrix(Random(ni * s.k, rng).data(), ni, s.k));
  const int64_t ldy = n[0] + n[1] + n[2];
  std::vector<float> together(s.rows * ldy), alone(s.rows * ldy);
  const Bf16MatmulJob jobs[3] = {{&w[0], together.data(), ldy},
                                 {&w[1], together.data() + n[0], ldy},
                                 {&w[2], together.data() + n[0] + n[1], ldy}};
  ThreadPool pool(2);
  Bf16MatmulMany(jobs, 3, x.data(), s.rows, s.k, &pool);
  Bf16Matmul(x.data(), s.rows, s.k, w[0], alone.data(), ldy, &pool);
  Bf16Matmul(x.data(), s.rows, s.k, w[1], alone.data() + n[0], ldy, &pool);
  Bf16Matmul(x.data(), s.rows, s.k, w[2], alone.data() + n[0] + n[1], ldy, &pool);
  ExpectSameBits(together.data(), alone.data(), s.rows * ldy, "many vs one by one");
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16MatmulTest,
                         ::testing::Values(Shape{1, 32, 16}, Shape{3, 45, 64}, Shape{13, 77, 96},
                                           Shape{25, 576, 576}, Shape{64, 192, 1536},
                                           Shape{7, 17, 5}, Shape{40, 33, 100}));

// The layout follows the hardware, then the measured rates: AMX first; with AVX512-BF16,
// `vdpbf16ps` pairs only where they outrun fp32 FMA (rates as measured on Zen 4 and in an
// Emerald Rapids guest, FLOP/s per core); PAGELLM_BF16_PAIRS=0/1 overrides the rates.
TEST(PreferredBf16LayoutTest, FollowsTheHardwareThenTheMeasuredRates) {
  CpuFeatures none, bf16, amx;
  bf16.avx2 = bf16.avx512 = bf16.avx512_bf16 = true;
  amx = bf16;
  amx.amx_bf16 = true;
  const internal::DotRates zen4{225e9, 115e9}, emerald{89e9, 180e9}, tie{100e9, 100e9};
  using internal::ChooseBf16Layout;
  EXPECT_EQ(ChooseBf16Layout(none, nullptr, zen4), Bf16Layout::kLanes);
  EXPECT_EQ(ChooseBf16Layout(none, "1", zen4), Bf16Layout::kLanes);
  EXPECT_EQ(ChooseBf16Layout(amx, "0", emerald), Bf16Layout::kAmxTiles);
  EXPECT_EQ(ChooseBf16Layout(bf16, nullptr, zen4), Bf16Layout::kPairs);
  EXPECT_EQ(ChooseBf16Layout(bf16, nullptr, emerald), Bf16Layout::kLanes);
  EXPECT_EQ(ChooseBf16Layout(bf16, nullptr, tie), Bf16Layout::kLanes);
  EXPECT_EQ(ChooseBf16Layout(bf16, "1", emerald), Bf16Layout::kPairs);
  EXPECT_EQ(ChooseBf16Layout(bf16, "0", zen4), Bf16Layout::kLanes);
  EXPECT_EQ(ChooseBf16Layout(bf16, "yes", emerald), Bf16Layout::kLanes);
  EXPECT_EQ(ChooseBf16Layout(bf16, "yes", zen4), Bf16Layout::kPairs);
}

// The measurement gives rates within the physically possible: at most 2 x 32 lanes x 2 FLOPs a
// cycle for fma, 4x that for pairs, at 6 GHz; at least 1 GFLOP/s.
TEST(PreferredBf16LayoutTest, MeasuresPlausibleRates) {
  if (!GetCpuFeatures().avx512_bf16) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const internal::DotRates r = internal::MeasureDotRates();
  EXPECT_GT(r.fma_flops, 1e9);
  EXPECT_LT(r.fma_flops, 2 * 16 * 2 * 6e9);
  EXPECT_GT(r.pairs_flops, 1e9);
  EXPECT_LT(r.pairs_flops, 2 * 16 * 4 * 6e9);
}

TEST(PackBf16MatrixTest, RoundsToNearestEvenAndKeepsNaN) {
  // 1 + 2^-8 is halfway between two bf16 values: ties to the even one (1.0); just above rounds up.
  const float w[3] = {1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, std::nanf("")};
  const PackedBf16Matrix p = internal::PackBf16MatrixAs(w, 3, 1, Bf16Layout::kLanes);
  EXPECT_EQ(p.data[0] & 0xFFFF, 0x3F80u);
  EXPECT_EQ(p.data[1] & 0xFFFF, 0x3F81u);
  EXPECT_EQ(p.data[2] & 0x7FC0, 0x7FC0u);  // a quiet NaN
  const float x = 2.0f;
  float y[3];
  Bf16Matmul(&x, 1, 1, p, y, 3, nullptr);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[1], 2.0f + 0x1p-6f);
  EXPECT_TRUE(std::isnan(y[2]));
}

}  // namespace
}  // namespace pagellm::kernels
