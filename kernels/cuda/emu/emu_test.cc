// The CPU emulator of the CUDA execution model (cuda_emu.h) as a specification: warp
// collectives as the PTX ISA defines them, the m16n8k16 tile against a float64 product, shared
// memory visible only after a barrier, and launches the hardware would refuse or that are
// undefined failing with an error instead of a wrong answer.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/half.h"
#include "gtest/gtest.h"
#include "kernels/cuda/emu/emu_selftest.h"
#include "kernels/cuda/testing/cuda_test_util.h"

namespace pagellm::kernels::cuda::emu_selftest {
namespace {

using testing::DeviceArray;

TEST(CudaEmuTest, ShufflesFollowThePtxDefinitions) {
  const int threads = 64;
  std::vector<int> in(threads);
  for (int i = 0; i < threads; ++i) in[i] = 1000 + 7 * i;
  DeviceArray<int> d_in(in), d_out(4 * threads);
  ASSERT_EQ(Shuffle(d_in.get(), d_out.get(), threads), cudaSuccess);
  const std::vector<int> out = d_out.Download();
  for (int w = 0; w < threads / 32; ++w) {
    for (int lane = 0; lane < 32; ++lane) {
      const int* got = out.data() + 128 * w;
      auto value = [&](int l) { return in[32 * w + l]; };
      EXPECT_EQ(got[lane], value(lane ^ 5)) << "xor, lane " << lane;
      EXPECT_EQ(got[32 + lane], value(lane + 3 < 32 ? lane + 3 : lane)) << "down, lane " << lane;
      EXPECT_EQ(got[64 + lane], value(lane >= 3 ? lane - 3 : lane)) << "up, lane " << lane;
      EXPECT_EQ(got[96 + lane], value((lane / 16) * 16 + 7)) << "idx width 16, lane " << lane;
    }
  }
}

TEST(CudaEmuTest, BallotCollectsEveryLanesPredicate) {
  std::vector<int> in(32);
  unsigned want = 0;
  for (int i = 0; i < 32; ++i) {
    in[i] = (i * 37) % 5 - 2;
    if (in[i] > 0) want |= 1u << i;
  }
  DeviceArray<int> d_in(in);
  DeviceArray<unsigned> d_out(32);
  ASSERT_EQ(Ballot(d_in.get(), d_out.get()), cudaSuccess);
  for (unsigned got : d_out.Download()) EXPECT_EQ(got, want);
}

TEST(CudaEmuTest, MmaTileIsTheMatrixProduct) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  for (bool bf16 : {true, false}) {
    const KvDtype t = bf16 ? KvDtype::kBF16 : KvDtype::kF16;
    std::vector<uint16_t> a(16 * 16), b(16 * 8);
    std::vector<float> c(16 * 8);
    for (auto& x : a) x = testing::FromHost(t, dist(rng));
    for (auto& x : b) x = testing::FromHost(t, dist(rng));
    for (auto& x : c) x = dist(rng);
    DeviceArray<uint16_t> d_a(a), d_b(b);
    DeviceArray<float> d_c(c);
    ASSERT_EQ(Mma(d_a.get(), d_b.get(), d_c.get(), bf16), cudaSuccess);
    const std::vector<float> got = d_c.Download();
    for (int m = 0; m < 16; ++m) {
      for (int n = 0; n < 8; ++n) {
        double want = c[m * 8 + n];
        for (int k = 0; k < 16; ++k) {
          want += static_cast<double>(testing::ToHost(t, a[m * 16 + k])) *
                  testing::ToHost(t, b[k * 8 + n]);
        }
        EXPECT_NEAR(got[m * 8 + n], want, 1e-5 * (1.0 + std::fabs(want)))
            << (bf16 ? "bf16" : "fp16") << " (" << m << ", " << n << ")";
      }
    }
  }
}

TEST(CudaEmuTest, SharedWritesShowOnlyAfterABarrier) {
  const int blocks = 3, threads = 64;
  DeviceArray<uint32_t> d_out(blocks * threads);
  ASSERT_EQ(Shared(d_out.get(), blocks, threads, true), cudaSuccess);
  std::vector<uint32_t> out = d_out.Download();
  for (int i = 0; i < blocks * threads; ++i) EXPECT_EQ(out[i], i / threads) << i;

  // Without the barrier the race shows: block 1 runs its threads in reverse, so the others read
  // shared memory as the block found it -- poisoned, not block 0's value.
  ASSERT_EQ(Shared(d_out.get(), blocks, threads, false), cudaSuccess);
  out = d_out.Download();
  for (int i = threads + 1; i < 2 * threads; ++i) EXPECT_EQ(out[i], 0xFFFFFFFFu) << i;
  EXPECT_EQ(out[threads], 1u);
}

TEST(CudaEmuTest, DynamicSharedMemoryIsTheLaunchsBytes) {
  DeviceArray<uint32_t> d_out(256);
  ASSERT_EQ(DynamicShared(d_out.get(), 256), cudaSuccess);
  const std::vector<uint32_t> out = d_out.Download();
  for (int i = 0; i < 256; ++i) EXPECT_EQ(out[i], 3u * (255 - i));
}

TEST(CudaEmuTest, UndefinedWarpBehaviourFailsTheLaunch) {
  DeviceArray<int> d_out(32);
  // Each launcher returns cudaGetLastError(), which reports the failure once (unlike the
  // hardware, where a faulting kernel spoils the context: here each test stays independent).
  EXPECT_EQ(ExitedLane(d_out.get()), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(Divergent(d_out.get()), cudaErrorLaunchFailure);
  DeviceArray<float> d_f(32);
  EXPECT_EQ(LargeShared(d_f.get()), cudaErrorLaunchFailure);
  // A good launch afterwards runs.
  DeviceArray<uint32_t> d_u(32);
  EXPECT_EQ(DynamicShared(d_u.get(), 32), cudaSuccess);
}

TEST(CudaEmuTest, LaunchesOverTheDeviceLimitsAreRefused) {
  DeviceArray<uint32_t> d_out(1024);
  EXPECT_EQ(Configured(dim3(1, 65536), dim3(32), 128, d_out.get()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(Configured(dim3(1), dim3(1025), 128, d_out.get()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(Configured(dim3(0), dim3(32), 128, d_out.get()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(Configured(dim3(1), dim3(32), 49 << 10, d_out.get()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(Configured(dim3(2, 3), dim3(32), 128, d_out.get()), cudaSuccess);
}

}  // namespace
}  // namespace pagellm::kernels::cuda::emu_selftest
