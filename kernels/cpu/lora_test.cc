#include "kernels/cpu/lora.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"

namespace pagellm::kernels {
namespace {

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// y + B (A x) in double, from B as [n_out][rank] (the layout PEFT stores).
std::vector<double> Reference(const std::vector<float>& x, const std::vector<float>& a,
                              const std::vector<float>& b, const std::vector<float>& y,
                              int64_t rank, int64_t n_in, int64_t n_out) {
  std::vector<double> u(rank), out(y.begin(), y.end());
  for (int64_t j = 0; j < rank; ++j) {
    for (int64_t k = 0; k < n_in; ++k) u[j] += static_cast<double>(a[j * n_in + k]) * x[k];
  }
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t j = 0; j < rank; ++j) out[o] += static_cast<double>(b[o * rank + j]) * u[j];
  }
  return out;
}

TEST(LoraAddRowsTest, AddsTheLowRankProductToEveryRow) {
  std::mt19937 rng(7);
  for (const auto& [rank, n_in, n_out] : {std::tuple<int64_t, int64_t, int64_t>{1, 5, 3},
                                          {8, 576, 192},
                                          {16, 1536, 576},
                                          {kMaxLoraRank, 40, 33}}) {
    const int64_t rows = 13, ldx = n_in + 3, ldy = n_out + 2;
    std::vector<float> x = Random(rows * ldx, rng), a = Random(rank * n_in, rng),
                       b = Random(n_out * rank, rng), y = Random(rows * ldy, rng);
    std::vector<float> bt(rank * n_out);
    for (int64_t o = 0; o < n_out; ++o) {
      for (int64_t j = 0; j < rank; ++j) bt[j * n_out + o] = b[o * rank + j];
    }
    std::vector<float> got = y;
    LoraAddRows(x.data(), ldx, rows, a.data(), bt.data(), rank, n_in, n_out, got.data(), ldy);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> xr(x.begin() + r * ldx, x.begin() + r * ldx + n_in);
      std::vector<float> yr(y.begin() + r * ldy, y.begin() + r * ldy + n_out);
      const std::vector<double> want = Reference(xr, a, b, yr, rank, n_in, n_out);
      // fp32 sums of rank * n_in terms of magnitude <= 1.
      const double tol = 1e-5 * rank * std::sqrt(static_cast<double>(n_in)) + 1e-5;
      for (int64_t o = 0; o < n_out; ++o) {
        ASSERT_NEAR(got[r * ldy + o], want[o], tol) << "rank " << rank << " row " << r;
      }
      // Padding between rows is not written.
      for (int64_t o = n_out; o < ldy; ++o) ASSERT_EQ(got[r * ldy + o], y[r * ldy + o]);
    }
  }
}

TEST(LoraAddRowsTest, ARowsResultDoesNotDependOnItsNeighbours) {
  std::mt19937 rng(11);
  const int64_t rank = 8, n_in = 100, n_out = 70, rows = 9;
  std::vector<float> x = Random(rows * n_in, rng), a = Random(rank * n_in, rng),
                     bt = Random(rank * n_out, rng);
  std::vector<float> all(rows * n_out, 0.0f);
  LoraAddRows(x.data(), n_in, rows, a.data(), bt.data(), rank, n_in, n_out, all.data(), n_out);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> one(n_out, 0.0f);
    LoraAddRows(x.data() + r * n_in, n_in, 1, a.data(), bt.data(), rank, n_in, n_out, one.data(),
                n_out);
    for (int64_t o = 0; o < n_out; ++o) ASSERT_EQ(one[o], all[r * n_out + o]);
  }
}

TEST(LoraAddRowsTest, EveryPathGivesTheSameBits) {
  const CpuFeatures& f = GetCpuFeatures();
  std::mt19937 rng(5);
  for (const auto& [rank, n_in, n_out] : {std::tuple<int64_t, int64_t, int64_t>{8, 576, 192},
                                          {3, 37, 29},
                                          {16, 1536, 576},
                                          {24, 100, 70}}) {
    const int64_t rows = 11;  // a tile of 8 rows and 3 alone in the AVX-512 path
    std::vector<float> x = Random(rows * n_in, rng), a = Random(rank * n_in, rng),
                       bt = Random(rank * n_out, rng), y0 = Random(rows * n_out, rng);
    std::vector<float> portable = y0;
    internal::LoraAddRowsPortable(x.data(), n_in, rows, a.data(), bt.data(), rank, n_in, n_out,
                                  portable.data(), n_out);
    if (f.avx2) {
      std::vector<float> avx2 = y0;
      internal::LoraAddRowsAvx2(x.data(), n_in, rows, a.data(), bt.data(), rank, n_in, n_out,
                                avx2.data(), n_out);
      EXPECT_EQ(avx2, portable) << "AVX2, rank " << rank;
    }
    if (f.avx512) {
      std::vector<float> avx512 = y0;
      internal::LoraAddRowsAvx512(x.data(), n_in, rows, a.data(), bt.data(), rank, n_in, n_out,
                                  avx512.data(), n_out);
      EXPECT_EQ(avx512, portable) << "AVX-512, rank " << rank;
    }
    if (!f.avx2) GTEST_SKIP() << "no AVX2 here: only the portable path runs";
  }
}

}  // namespace
}  // namespace pagellm::kernels
