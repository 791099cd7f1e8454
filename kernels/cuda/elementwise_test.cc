// Embedding gather, SiLU-and-mul, conversion and random fill against host references on fresh
// random inputs, outputs poisoned before each run.
#include "kernels/cuda/elementwise.h"

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/testing/cuda_test_util.h"

namespace pagellm::kernels::cuda {
namespace {

using testing::DeviceArray;

class ElementwiseTest : public ::testing::TestWithParam<KvDtype> {};

TEST_P(ElementwiseTest, EmbeddingWidensTheRowsExactly) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const KvDtype t = GetParam();
  std::mt19937 rng(1);
  for (int64_t dim : {576, 4100}) {  // 4100: not a multiple of 8 (the scalar path)
    const int64_t vocab = 300;
    const std::vector<uint16_t> table =
        testing::ToDeviceBits(t, testing::RandomValues(vocab * dim, rng));
    std::vector<int32_t> ids = {0, 299, 7, 7, 150};
    DeviceArray<uint16_t> d_table(table);
    DeviceArray<int32_t> d_ids(ids);
    DeviceArray<float> d_out(ids.size() * dim);
    d_out.Poison();
    ASSERT_CUDA_OK(LaunchEmbedding(d_table.get(), t, d_ids.get(), ids.size(), dim, 0, vocab,
                                   d_out.get(), nullptr));
    const std::vector<float> got = d_out.Download();
    for (size_t r = 0; r < ids.size(); ++r) {
      for (int64_t j = 0; j < dim; ++j) {
        ASSERT_EQ(got[r * dim + j], testing::ToHost(t, table[ids[r] * dim + j])) << r << "," << j;
      }
    }
  }
}

TEST_P(ElementwiseTest, EmbeddingOfAVocabularySliceZeroesOtherRanksIds) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const KvDtype t = GetParam();
  std::mt19937 rng(11);
  const int64_t dim = 256, vocab = 400, ranks = 4, slice = vocab / ranks;
  const std::vector<uint16_t> table =
      testing::ToDeviceBits(t, testing::RandomValues(vocab * dim, rng));
  const std::vector<int32_t> ids = {0, 99, 100, 199, 250, 399, 7, 300};
  DeviceArray<int32_t> d_ids(ids);
  // Summed over the ranks, the slices' outputs are the whole table's rows.
  std::vector<float> sum(ids.size() * dim, 0.0f);
  for (int64_t r = 0; r < ranks; ++r) {
    DeviceArray<uint16_t> d_slice(std::vector<uint16_t>(table.begin() + r * slice * dim,
                                                        table.begin() + (r + 1) * slice * dim));
    DeviceArray<float> d_out(ids.size() * dim);
    d_out.Poison();
    ASSERT_CUDA_OK(LaunchEmbedding(d_slice.get(), t, d_ids.get(), ids.size(), dim, r * slice, slice,
                                   d_out.get(), nullptr));
    const std::vector<float> got = d_out.Download();
    for (size_t i = 0; i < ids.size(); ++i) {
      const bool mine = ids[i] >= r * slice && ids[i] < (r + 1) * slice;
      for (int64_t j = 0; j < dim; ++j) {
        const float want = mine ? testing::ToHost(t, table[ids[i] * dim + j]) : 0.0f;
        ASSERT_EQ(got[i * dim + j], want) << "rank " << r << " id " << ids[i] << " col " << j;
        sum[i * dim + j] += got[i * dim + j];
      }
    }
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < dim; ++j) {
      ASSERT_EQ(sum[i * dim + j], testing::ToHost(t, table[ids[i] * dim + j]));
    }
  }
}

TEST(InterleaveShardsTest, GatheredShardsBecomeRowsOfTheWholeVocabulary) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(12);
  for (const auto& [shards, rows, cols] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 5, 33}, {2, 1, 64128}, {4, 7, 1000}, {8, 3, 17}}) {
    const std::vector<float> src = testing::RandomValues(shards * rows * cols, rng);
    DeviceArray<float> d_src(src), d_dst(shards * rows * cols);
    d_dst.Poison();
    ASSERT_CUDA_OK(LaunchInterleaveShards(d_src.get(), shards, rows, cols, d_dst.get(), nullptr));
    const std::vector<float> got = d_dst.Download();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t s = 0; s < shards; ++s) {
        for (int64_t c = 0; c < cols; ++c) {
          ASSERT_EQ(got[(r * shards + s) * cols + c], src[(s * rows + r) * cols + c])
              << shards << " shards, row " << r << ", shard " << s << ", col " << c;
        }
      }
    }
  }
}

TEST_P(ElementwiseTest, SiluMulMatchesFloat64) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const KvDtype t = GetParam();
  std::mt19937 rng(2);
  const int64_t rows = 19, inter = 1536;
  const std::vector<uint16_t> in =
      testing::ToDeviceBits(t, testing::RandomValues(rows * 2 * inter, rng, 3.0f));
  const std::vector<float> x = testing::FromDeviceBits(t, in);
  DeviceArray<uint16_t> d_in(in), d_out(rows * inter);
  d_out.Poison();
  ASSERT_CUDA_OK(LaunchSiluMul(d_in.get(), rows, inter, t, d_out.get(), nullptr));
  const std::vector<float> got = testing::FromDeviceBits(t, d_out.Download());
  std::vector<double> want(rows * inter);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < inter; ++i) {
      const double g = x[r * 2 * inter + i], u = x[r * 2 * inter + inter + i];
      want[r * inter + i] = g / (1.0 + std::exp(-g)) * u;
    }
  }
  EXPECT_LT(testing::RelativeError(got, want), testing::kHalfTolerance);
}

TEST_P(ElementwiseTest, ConvertRoundsLikeTheHost) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const KvDtype t = GetParam();
  std::mt19937 rng(3);
  const std::vector<float> x = testing::RandomValues(100003, rng, 10.0f);
  DeviceArray<float> d_x(x);
  DeviceArray<uint16_t> d_y(x.size());
  d_y.Poison();
  ASSERT_CUDA_OK(LaunchConvert(d_x.get(), KvDtype::kF32, x.size(), d_y.get(), t, nullptr));
  const std::vector<uint16_t> y = d_y.Download();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], testing::FromHost(t, x[i])) << x[i];
  // And back to fp32, exactly.
  DeviceArray<float> d_back(x.size());
  d_back.Poison();
  ASSERT_CUDA_OK(LaunchConvert(d_y.get(), t, x.size(), d_back.get(), KvDtype::kF32, nullptr));
  const std::vector<float> back = d_back.Download();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(back[i], testing::ToHost(t, y[i]));
}

TEST_P(ElementwiseTest, FillUniformIsBoundedCenteredAndAFunctionOfTheSeed) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const KvDtype t = GetParam();
  const int64_t n = 1 << 20;
  DeviceArray<uint16_t> a(n), b(n), c(n);
  a.Poison();
  b.Poison();
  ASSERT_CUDA_OK(LaunchFillUniform(a.get(), t, n, 42, 0.5f, nullptr));
  ASSERT_CUDA_OK(LaunchFillUniform(b.get(), t, n, 42, 0.5f, nullptr));
  ASSERT_CUDA_OK(LaunchFillUniform(c.get(), t, n, 43, 0.5f, nullptr));
  const std::vector<float> va = testing::FromDeviceBits(t, a.Download());
  const std::vector<uint16_t> ba = a.Download(), bb = b.Download(), bc = c.Download();
  EXPECT_EQ(ba, bb);
  EXPECT_NE(ba, bc);
  double sum = 0.0, sq = 0.0;
  for (float v : va) {
    ASSERT_TRUE(v >= -0.5f && v <= 0.5f) << v;
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 0.25 / 3, 0.01);  // variance of U(-a, a) is a^2 / 3
}

TEST_P(ElementwiseTest, FillConstantWritesEveryElement) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const KvDtype t = GetParam();
  DeviceArray<uint16_t> a(100001);
  a.Poison();
  ASSERT_CUDA_OK(LaunchFillConstant(a.get(), t, a.size(), 0.01f, nullptr));
  for (uint16_t bits : a.Download()) ASSERT_EQ(bits, testing::FromHost(t, 0.01f));
}

INSTANTIATE_TEST_SUITE_P(Types, ElementwiseTest, ::testing::Values(KvDtype::kBF16, KvDtype::kF16),
                         [](const auto& info) {
                           return info.param == KvDtype::kBF16 ? std::string("bf16")
                                                               : std::string("f16");
                         });

}  // namespace
}  // namespace pagellm::kernels::cuda
