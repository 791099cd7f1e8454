// NCCL on the GPU machine: it has one GPU, so the group is of world size 1 -- the same code path
// (rendezvous, ncclCommInitRank, enqueue and wait) as a larger group, with results that must be
// the identity. Skips without a device; fails on a device where NCCL cannot be loaded.
#include <cstdint>
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

TEST(NcclCommunicatorTest, EnqueuedCollectivesRunInStreamOrderAndInACapturedGraph) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no GPU";
  gloo::rendezvous::HashStore store;
  auto comm = ConnectNccl({}, store);  // waiting collectives on its own stream
  ASSERT_TRUE(comm.ok()) << comm.status();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  constexpr int64_t kN = 3001;
  std::vector<uint16_t> bf16(kN);
  std::vector<float> f32(kN);
  for (int64_t i = 0; i < kN; ++i) {
    bf16[i] = static_cast<uint16_t>(0x3f80 + (i % 200));  // 1.0 and up, exact in bf16
    f32[i] = 0.25f * i - 3.0f;
  }
  uint16_t* h = nullptr;
  float *x = nullptr, *y = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&h), kN * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x), kN * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&y), kN * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(h, bf16.data(), kN * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(x, f32.data(), kN * 4, cudaMemcpyHostToDevice), cudaSuccess);

  // Eager: a kernel-free stream of collectives, waited for once.
  ASSERT_TRUE((*comm)->EnqueueAllReduceSum(h, kN, CollectiveDtype::kBF16, stream).ok());
  ASSERT_TRUE((*comm)->EnqueueAllReduceSum(x, kN, CollectiveDtype::kF32, stream).ok());
  ASSERT_TRUE((*comm)->EnqueueAllGather(x, kN, CollectiveDtype::kF32, y, stream).ok());
  ASSERT_TRUE((*comm)->WaitStream(stream).ok());
  std::vector<uint16_t> bf16_back(kN);
  std::vector<float> back(kN);
  ASSERT_EQ(cudaMemcpy(bf16_back.data(), h, kN * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), y, kN * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(bf16_back, bf16);
  EXPECT_EQ(back, f32);

  // Captured in a CUDA graph (the decode graphs' way), then replayed.
  ASSERT_EQ(cudaMemset(y, 0, kN * 4), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const absl::Status reduce = (*comm)->EnqueueAllReduceSum(x, kN, CollectiveDtype::kF32, stream);
  const absl::Status gather = (*comm)->EnqueueAllGather(x, kN, CollectiveDtype::kF32, y, stream);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(reduce.ok()) << reduce;
  ASSERT_TRUE(gather.ok()) << gather;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_TRUE((*comm)->WaitStream(stream).ok());
  ASSERT_EQ(cudaMemcpy(back.data(), y, kN * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, f32);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  comm->reset();
  cudaFree(h);
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
