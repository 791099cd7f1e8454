// AddRmsNorm against a float64 reference on fresh random inputs: with and without the residual
// add, gathered rows, both 16-bit types, outputs poisoned before each run.
#include "kernels/cuda/rms_norm.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/testing/cuda_test_util.h"

namespace pagellm::kernels::cuda {
namespace {

using testing::DeviceArray;

struct Case {
  KvDtype dtype;
  int64_t dim;
  bool add;
  bool gather;
};

class AddRmsNormTest : public ::testing::TestWithParam<Case> {};

TEST_P(AddRmsNormTest, MatchesFloat64Reference) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const Case c = GetParam();
  const int64_t src_rows = 37, dim = c.dim;
  std::mt19937 rng(static_cast<unsigned>(dim * 2 + c.add + 4 * c.gather));
  std::vector<float> res = testing::RandomValues(src_rows * dim, rng, 3.0f);
  std::vector<uint16_t> add_bits =
      testing::ToDeviceBits(c.dtype, testing::RandomValues(src_rows * dim, rng));
  const std::vector<float> add = testing::FromDeviceBits(c.dtype, add_bits);
  std::vector<float> w = testing::RandomValues(dim, rng);
  std::vector<int32_t> index;
  if (c.gather) index = {36, 0, 5, 17};
  const int64_t rows = c.gather ? static_cast<int64_t>(index.size()) : src_rows;

  DeviceArray<float> d_res(res), d_w(w);
  DeviceArray<uint16_t> d_add(add_bits), d_out(rows * dim);
  DeviceArray<int32_t> d_index(index);
  d_out.Poison();
  AddRmsNormParams p;
  p.residual = d_res.get();
  p.add = c.add ? d_add.get() : nullptr;
  p.index = c.gather ? d_index.get() : nullptr;
  p.write_residual = !c.gather;
  p.weight = d_w.get();
  p.rows = rows;
  p.dim = dim;
  p.eps = 1e-5f;
  p.dtype = c.dtype;
  p.out = d_out.get();
  ASSERT_CUDA_OK(LaunchAddRmsNorm(p, nullptr));
  const std::vector<float> got = testing::FromDeviceBits(c.dtype, d_out.Download());
  const std::vector<float> res_after = d_res.Download();

  std::vector<double> want(rows * dim);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t r = c.gather ? index[i] : i;
    double ss = 0.0;
    std::vector<double> v(dim);
    for (int64_t j = 0; j < dim; ++j) {
      v[j] = static_cast<double>(res[r * dim + j]) + (c.add ? add[r * dim + j] : 0.0);
      ss += v[j] * v[j];
    }
    const double scale = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int64_t j = 0; j < dim; ++j) want[i * dim + j] = v[j] * scale * w[j];
  }
  EXPECT_LT(testing::RelativeError(got, want), testing::kHalfTolerance);
  for (int64_t i = 0; i < src_rows * dim; ++i) {
    const float expect = c.add && !c.gather ? res[i] + add[i] : res[i];
    ASSERT_EQ(res_after[i], expect) << "residual element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, AddRmsNormTest,
                         ::testing::Values(Case{KvDtype::kBF16, 576, false, false},
                                           Case{KvDtype::kBF16, 4096, true, false},
                                           Case{KvDtype::kF16, 4096, true, false},
                                           Case{KvDtype::kBF16, 5120, true, true},
                                           Case{KvDtype::kF16, 1000, false, true}));

TEST(AddRmsNormTest, RefusesBadShapes) {
  AddRmsNormParams p;
  p.dim = 0;
  p.rows = 1;
  EXPECT_EQ(LaunchAddRmsNorm(p, nullptr), cudaErrorInvalidValue);
  p.dim = 8;
  p.dtype = KvDtype::kF32;
  EXPECT_EQ(LaunchAddRmsNorm(p, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace pagellm::kernels::cuda
