#include "kernels/cpu/quant_matmul.h"

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"

namespace pagellm::kernels {
namespace {

// Random weights in GGML block format with finite fp16 scales.
std::vector<uint8_t> RandomWeights(GgmlType type, int64_t n, int64_t k, std::mt19937& rng) {
  const auto traits = GetGgmlTypeTraits(type);
  std::vector<uint8_t> w(n * k / 32 * traits.block_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  for (int64_t blk = 0; blk < n * k / 32; ++blk) {
    uint8_t* p = w.data() + blk * traits.block_bytes;
    uint16_t d = FloatToHalf(scale(rng));
    std::memcpy(p, &d, 2);
    if (type == GgmlType::kQ4_1) {
      uint16_t m = FloatToHalf(scale(rng) * 8);
      std::memcpy(p + 2, &m, 2);
    }
  }
  return w;
}

std::vector<float> RandomActivations(int64_t m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(m * k);
  for (auto& v : x) v = dist(rng);
  return x;
}

// Random m x k activations (quantized) and n x k weights (raw and packed) of one type.
struct Problem {
  std::vector<uint8_t> w;
  std::vector<float> x;
  QuantizedActivations qx;
  PackedQuantMatrix packed;
};

Problem MakeProblem(GgmlType type, int64_t m, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.w = RandomWeights(type, n, k, rng);
  p.x = RandomActivations(m, k, rng);
  QuantizeActivations(p.x.data(), m, k, k, &p.qx, nullptr);
  auto packed = PackQuantMatrix(type, p.w.data(), n, k);
  EXPECT_TRUE(packed.ok()) << packed.status();
  if (packed.ok()) p.packed = *std::move(packed);
  return p;
}

class QuantMatmulTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(QuantMatmulTest, MatchesDequantizedReference) {
  const GgmlType type = GetParam();
  const int64_t m = 5, n = 37, k = 256;
  Problem p = MakeProblem(type, m, n, k, 7);
  const auto& w = p.w;
  const auto& x = p.x;
  const auto& qx = p.qx;
  std::vector<float> y(m * n);
  QuantMatmul(p.packed, qx, y.data(), n, nullptr);

  // Reference: dequantized weights times the dequantized int8 activations, in double.
  std::vector<float> wf(n * k);
  ASSERT_TRUE(DequantizeRow(type, w.data(), wf.data(), n * k).ok());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t c = 0; c < k; ++c) {
        const double xv = static_cast<double>(qx.d[(i * k + c) / 32]) * qx.qs[i * k + c];
        ref += xv * wf[j * k + c];
        mag += std::fabs(xv * wf[j * k + c]);
      }
      ASSERT_FALSE(std::isnan(y[i * n + j]));
      EXPECT_NEAR(y[i * n + j], ref, 1e-5 * mag + 1e-6) << "row " << i << " col " << j;
    }
  }
  // And close to the exact fp32 product (activation quantization error only).
  double err = 0, norm = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t c = 0; c < k; ++c) ref += static_cast<double>(x[i * k + c]) * wf[j * k + c];
      err += (ref - y[i * n + j]) * (ref - y[i * n + j]);
      norm += ref * ref;
    }
  EXPECT_LT(std::sqrt(err / norm), 0.02);
}

TEST_P(QuantMatmulTest, Avx512AndPortableAreBitIdentical) {
  const GgmlType type = GetParam();
  // n: a partial group of 8 (45), an odd number of groups (70: the 512-bit pairs and a single
  // group); m: the decode path (2) and the tiled one (7: tiles of 4 and 3).
  for (auto [m, n] : {std::pair<int64_t, int64_t>{7, 45}, {7, 70}, {2, 70}}) {
    const int64_t k = 576;
    Problem p = MakeProblem(type, m, n, k, 11);
    std::vector<float> a(m * n), b(m * n);
    internal::QuantMatmulGroupsPortable(p.packed, 0, p.packed.groups, p.qx, a.data(), n);
    if (!__builtin_cpu_supports("avx512vnni")) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
    internal::QuantMatmulGroupsAvx512(p.packed, 0, p.packed.groups, p.qx, b.data(), n);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << m << "x" << n;
  }
}

TEST_P(QuantMatmulTest, RowResultDoesNotDependOnBatchOrThreads) {
  const GgmlType type = GetParam();
  const int64_t m = 9, n = 70, k = 128;
  Problem p = MakeProblem(type, m, n, k, 13);
  const auto& x = p.x;
  ThreadPool pool(2);
  std::vector<float> batched(m * n);
  QuantMatmul(p.packed, p.qx, batched.data(), n, &pool);
  for (int64_t i = 0; i < m; ++i) {
    QuantizedActivations one;
    QuantizeActivations(x.data() + i * k, 1, k, k, &one, nullptr);
    std::vector<float> single(n);
    QuantMatmul(p.packed, one, single.data(), n, nullptr);
    EXPECT_EQ(0, std::memcmp(single.data(), batched.data() + i * n, n * sizeof(float))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantMatmulTest,
                         ::testing::Values(GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0),
                         [](const auto& info) {
                           return std::string(GetGgmlTypeTraits(info.param).name);
                         });

}  // namespace
}  // namespace pagellm::kernels
