// NCCL on the GPU machine: it has one GPU, so the group is of world size 1 -- the same code path
// (rendezvous, ncclCommInitRank, enqueue and wait) as a larger group, with results that must be
// the identity. Skips without a device; fails on a device where NCCL cannot be loaded.
#include <vector>

#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/dist/nccl_communicator.h"

namespace pagellm {
namespace {

TEST(NcclCommunicatorTest, AGroupOfOneRunsEveryCollectiveOnDeviceBuffers) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no GPU";
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  gloo::rendezvous::HashStore store;
  auto comm = ConnectNccl({}, store, stream);
  ASSERT_TRUE(comm.ok()) << comm.status();
  constexpr int64_t kN = 4099;
  std::vector<float> host(kN);
  for (int64_t i = 0; i < kN; ++i) host[i] = 0.5f * i - 7.0f;
  float *x = nullptr, *y = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x), kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&y), kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(x, host.data(), kN * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE((*comm)->AllReduceSum(x, kN).ok());
  ASSERT_TRUE((*comm)->AllGather(x, kN, y).ok());
  ASSERT_TRUE((*comm)->Broadcast(y, kN * sizeof(float), 0).ok());
  ASSERT_TRUE((*comm)->Barrier().ok());
  std::vector<float> back(kN, -1.0f);
  ASSERT_EQ(cudaMemcpy(back.data(), y, kN * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
  ASSERT_EQ(cudaMemset(y, 0, kN * sizeof(float)), cudaSuccess);
  ASSERT_TRUE((*comm)->Gather(x, kN, y, 0).ok());
  ASSERT_EQ(cudaMemcpy(back.data(), y, kN * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
  EXPECT_GT((*comm)->collective_seconds(), 0.0);
  EXPECT_EQ((*comm)->Gather(x, kN, y, 1).code(), absl::StatusCode::kInvalidArgument);
  comm->reset();
  cudaFree(x);
  cudaFree(y);
  cudaStreamDestroy(stream);
}

TEST(NcclCommunicatorTest, ARankOutsideTheGroupIsRefused) {
  gloo::rendezvous::HashStore store;
  NcclOptions o;
  o.rank = 1;
  EXPECT_EQ(ConnectNccl(o, store, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagellm
