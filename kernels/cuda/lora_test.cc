// LaunchLora against a float64 reference: rows of two adapters, one of which leaves the module
// alone, and base-model rows, in strided buffers of both 16-bit types; rows without an adapter
// (or whose adapter skips the module) keep their exact bits.
#include "kernels/cuda/lora.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/testing/cuda_test_util.h"

namespace pagellm::kernels::cuda {
namespace {

using testing::DeviceArray;

struct Case {
  KvDtype dtype;
  int32_t rank;
  int64_t n_in, n_out;
};

class LoraKernelTest : public ::testing::TestWithParam<Case> {};

TEST_P(LoraKernelTest, AddsTheAdaptersProductToItsRowsOnly) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const Case c = GetParam();
  const int64_t tokens = 6, ldx = c.n_in + 8, ldy = c.n_out + 16;
  const std::vector<int32_t> token_adapter = {0, -1, 1, 0, 0, -1};
  std::mt19937 rng(static_cast<unsigned>(c.rank * 31 + c.n_in));
  const std::vector<uint16_t> x_bits =
      testing::ToDeviceBits(c.dtype, testing::RandomValues(tokens * ldx, rng));
  const std::vector<uint16_t> y_bits =
      testing::ToDeviceBits(c.dtype, testing::RandomValues(tokens * ldy, rng));
  const std::vector<float> x = testing::FromDeviceBits(c.dtype, x_bits);
  const std::vector<float> y = testing::FromDeviceBits(c.dtype, y_bits);
  const std::vector<float> a = testing::RandomValues(c.rank * c.n_in, rng, 0.1f);
  const std::vector<float> bt = testing::RandomValues(c.rank * c.n_out, rng, 0.5f);

  DeviceArray<uint16_t> d_x(x_bits), d_y(y_bits);
  DeviceArray<float> d_a(a), d_bt(bt), d_u(tokens * c.rank);
  DeviceArray<int32_t> d_adapter(token_adapter);
  // Adapter 0 adapts the module; adapter 1 does not (a null slot).
  const std::vector<LoraSlot> slots = {{d_a.get(), d_bt.get(), c.rank}, {}};
  DeviceArray<uint8_t> d_slots(slots.size() * sizeof(LoraSlot));
  ASSERT_CUDA_OK(cudaMemcpy(d_slots.get(), slots.data(), slots.size() * sizeof(LoraSlot),
                            cudaMemcpyHostToDevice));
  LoraParams p;
  p.x = d_x.get();
  p.ldx = ldx;
  p.y = d_y.get();
  p.ldy = ldy;
  p.dtype = c.dtype;
  p.n_in = c.n_in;
  p.n_out = c.n_out;
  p.num_tokens = tokens;
  p.token_adapter = d_adapter.get();
  p.slots = reinterpret_cast<const LoraSlot*>(d_slots.get());
  p.u = d_u.get();
  p.max_rank = c.rank;
  ASSERT_CUDA_OK(LaunchLora(p, nullptr));
  const std::vector<uint16_t> got_bits = d_y.Download();
  const std::vector<float> got = testing::FromDeviceBits(c.dtype, got_bits);

  std::vector<float> adapted;
  std::vector<double> want;
  for (int64_t t = 0; t < tokens; ++t) {
    if (token_adapter[t] != 0) {
      for (int64_t o = 0; o < ldy; ++o) {
        ASSERT_EQ(got_bits[t * ldy + o], y_bits[t * ldy + o]) << "row " << t << " touched";
      }
      continue;
    }
    std::vector<double> u(c.rank, 0.0);
    for (int32_t j = 0; j < c.rank; ++j) {
      for (int64_t k = 0; k < c.n_in; ++k) u[j] += double{a[j * c.n_in + k]} * x[t * ldx + k];
    }
    for (int64_t o = 0; o < c.n_out; ++o) {
      double v = y[t * ldy + o];
      for (int32_t j = 0; j < c.rank; ++j) v += u[j] * bt[j * c.n_out + o];
      want.push_back(v);
      adapted.push_back(got[t * ldy + o]);
    }
    for (int64_t o = c.n_out; o < ldy; ++o) ASSERT_EQ(got_bits[t * ldy + o], y_bits[t * ldy + o]);
  }
  EXPECT_LT(testing::RelativeError(adapted, want), testing::kHalfTolerance);
}

INSTANTIATE_TEST_SUITE_P(Sweep, LoraKernelTest,
                         ::testing::Values(Case{KvDtype::kBF16, 8, 576, 192},
                                           Case{KvDtype::kF16, 16, 1536, 576},
                                           Case{KvDtype::kBF16, 3, 40, 300}));

TEST(LoraKernelTest, RefusesBadShapes) {
  LoraParams p;
  EXPECT_EQ(LaunchLora(p, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace pagellm::kernels::cuda
