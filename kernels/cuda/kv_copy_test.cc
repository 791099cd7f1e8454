// Batched whole-block copies inside a device pool: every copied block equals its source and no
// other block changes.
#include "kernels/cuda/kv_copy.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/testing/cuda_test_util.h"

namespace pagellm::kernels::cuda {
namespace {

TEST(CopyBlocksTest, CopiesEachPairAndNothingElse) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(5);
  for (int64_t block_bytes : {int64_t{16}, int64_t{4096}, int64_t{2} * 32 * 8 * 16 * 128 * 2}) {
    const int64_t blocks = 24, words = blocks * block_bytes / 4;
    std::vector<uint32_t> pool(words);
    for (auto& w : pool) w = rng();
    const std::vector<int32_t> pairs = {3, 10, 0, 23, 5, 6, 7, 1};
    testing::DeviceArray<uint32_t> d_pool(pool);
    testing::DeviceArray<int32_t> d_pairs(pairs);
    ASSERT_CUDA_OK(LaunchCopyBlocks(d_pool.get(), block_bytes, d_pairs.get(), 4, nullptr));
    const std::vector<uint32_t> got = d_pool.Download();
    std::vector<uint32_t> want = pool;
    const int64_t per = block_bytes / 4;
    for (int i = 0; i < 4; ++i) {
      std::copy(pool.begin() + pairs[2 * i] * per, pool.begin() + (pairs[2 * i] + 1) * per,
                want.begin() + pairs[2 * i + 1] * per);
    }
    ASSERT_EQ(got, want) << block_bytes;
  }
}

TEST(CopyBlocksTest, RefusesUnalignedBlocks) {
  EXPECT_EQ(LaunchCopyBlocks(nullptr, 24, nullptr, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchCopyBlocks(nullptr, 32, nullptr, 0, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace pagellm::kernels::cuda
