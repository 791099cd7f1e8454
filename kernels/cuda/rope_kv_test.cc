// RoPE + paged K/V write against a float64 reference: both rotation layouts, with and without
// the Q/K/V bias, head dims 64 and 128, block sizes 8/16/32, a dense and an interleaved pool.
#include "kernels/cuda/rope_kv.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/testing/cuda_test_util.h"

namespace pagellm::kernels::cuda {
namespace {

using testing::DeviceArray;

struct Case {
  int64_t head_dim;
  int64_t block_size;
  bool neox;
  bool bias;
  bool interleaved;
};

class RopeKvTest : public ::testing::TestWithParam<Case> {};

TEST_P(RopeKvTest, MatchesFloat64Reference) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const Case c = GetParam();
  const KvDtype t = KvDtype::kBF16;
  const int64_t d = c.head_dim, heads = 8, kv_heads = 2, tokens = 29, max_pos = 4096;
  const int64_t stride = (heads + 2 * kv_heads) * d, num_blocks = 64;
  std::mt19937 rng(static_cast<unsigned>(d + c.block_size + 2 * c.neox + 4 * c.bias));

  std::vector<float> cos_sin(max_pos * d);
  for (int64_t p = 0; p < max_pos; ++p) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double a = p * std::pow(10000.0, -2.0 * i / d);
      cos_sin[p * d + 2 * i] = static_cast<float>(std::cos(a));
      cos_sin[p * d + 2 * i + 1] = static_cast<float>(std::sin(a));
    }
  }
  const std::vector<uint16_t> qkv_bits =
      testing::ToDeviceBits(t, testing::RandomValues(tokens * stride, rng));
  const std::vector<float> qkv = testing::FromDeviceBits(t, qkv_bits);
  const std::vector<float> bias = testing::RandomValues(stride, rng);
  std::vector<int32_t> pos(tokens);
  for (auto& p : pos) p = static_cast<int32_t>(rng() % max_pos);
  std::vector<int64_t> slots(num_blocks * c.block_size);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(tokens);

  PagedKvLayer kv;
  kv.dtype = t;
  kv.block_size = c.block_size;
  kv.num_kv_heads = kv_heads;
  kv.head_dim = d;
  const int64_t block_elems = kv_heads * c.block_size * d;
  kv.block_stride = c.interleaved ? 3 * block_elems : 0;  // K and V of a block side by side
  const int64_t pool_elems = num_blocks * kv.shape().stride() + block_elems;
  DeviceArray<uint16_t> d_pool_k(pool_elems), d_pool_v(pool_elems);
  d_pool_k.Poison();
  d_pool_v.Poison();
  kv.k = d_pool_k.get();
  kv.v = d_pool_v.get();
  DeviceArray<uint16_t> d_qkv(qkv_bits);
  DeviceArray<float> d_bias(bias), d_cs(cos_sin);
  DeviceArray<int32_t> d_pos(pos);
  DeviceArray<int64_t> d_slots(slots);
  RopeKvParams p;
  p.qkv = d_qkv.get();
  p.qkv_stride = stride;
  p.bias = c.bias ? d_bias.get() : nullptr;
  p.positions = d_pos.get();
  p.slots = d_slots.get();
  p.cos_sin = d_cs.get();
  p.neox = c.neox;
  p.num_tokens = tokens;
  p.num_heads = heads;
  p.kv = kv;
  ASSERT_CUDA_OK(LaunchRopeKv(p, nullptr));
  const std::vector<float> q_out = testing::FromDeviceBits(t, d_qkv.Download());
  const std::vector<float> k_pool = testing::FromDeviceBits(t, d_pool_k.Download());
  const std::vector<float> v_pool = testing::FromDeviceBits(t, d_pool_v.Download());

  std::vector<float> got_q, got_k, got_v;
  std::vector<double> want_q, want_k, want_v;
  for (int64_t tok = 0; tok < tokens; ++tok) {
    for (int64_t h = 0; h < heads + 2 * kv_heads; ++h) {
      std::vector<double> x(d);
      for (int64_t j = 0; j < d; ++j) {
        x[j] = qkv[tok * stride + h * d + j] + (c.bias ? bias[h * d + j] : 0.0);
      }
      std::vector<double> y = x;
      if (h < heads + kv_heads) {
        for (int64_t i = 0; i < d / 2; ++i) {
          const int64_t a = c.neox ? i : 2 * i, b = c.neox ? i + d / 2 : 2 * i + 1;
          const double ang = pos[tok] * std::pow(10000.0, -2.0 * i / d);
          y[a] = x[a] * std::cos(ang) - x[b] * std::sin(ang);
          y[b] = x[a] * std::sin(ang) + x[b] * std::cos(ang);
        }
      }
      for (int64_t j = 0; j < d; ++j) {
        if (h < heads) {
          got_q.push_back(q_out[tok * stride + h * d + j]);
          want_q.push_back(y[j]);
        } else if (h < heads + kv_heads) {
          got_k.push_back(k_pool[kv.shape().offset(slots[tok], h - heads) + j]);
          want_k.push_back(y[j]);
        } else {
          got_v.push_back(v_pool[kv.shape().offset(slots[tok], h - heads - kv_heads) + j]);
          want_v.push_back(y[j]);
        }
      }
    }
  }
  EXPECT_LT(testing::RelativeError(got_q, want_q), testing::kHalfTolerance);
  EXPECT_LT(testing::RelativeError(got_k, want_k), testing::kHalfTolerance);
  EXPECT_LT(testing::RelativeError(got_v, want_v), testing::kHalfTolerance);
  // K and V heads are untouched in the projection buffer only for Q: the kernel writes the K/V
  // heads to the cache and leaves their source as it was.
  for (int64_t tok = 0; tok < tokens; ++tok) {
    for (int64_t j = heads * d; j < stride; ++j) {
      ASSERT_EQ(q_out[tok * stride + j], qkv[tok * stride + j]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, RopeKvTest,
                         ::testing::Values(Case{64, 16, true, false, false},
                                           Case{128, 16, true, true, false},
                                           Case{128, 8, false, false, true},
                                           Case{64, 32, false, true, true},
                                           Case{128, 32, true, true, true}));

}  // namespace
}  // namespace pagellm::kernels::cuda
