// NCCL on the GPU machine: it has one GPU, so the group is of world size 1 -- the same code path
// (rendezvous, ncclCommInitRank, enqueue and wait) as a larger group, with results that must be
// the identity. Skips without a device; fails on a device where NCCL cannot be loaded. Groups of
// two need two GPUs, or the emulated device and NCCL (PAGELLM_NCCL_EMULATED: ranks are threads
// sharing it).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
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

// The device rank `rank` of a two-rank group uses, or -1 where the machine cannot hold one.
int TwoRankDevice(int rank) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return -1;
#ifdef PAGELLM_NCCL_EMULATED
  return 0 * rank;
#else
  return devices >= 2 ? rank : -1;
#endif
}

std::vector<float> Download(const float* d, int64_t n) {
  std::vector<float> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

TEST(NcclCommunicatorTest, TwoRanksReduceGatherAndBroadcast) {
  if (TwoRankDevice(1) < 0) GTEST_SKIP() << "needs two GPUs (or the emulator)";
  constexpr int64_t kN = 1031;
  const auto value = [](int rank, int64_t i) { return 0.5f * i - 3.0f + 100.0f * rank; };
  gloo::rendezvous::HashStore store;
  std::vector<float> reduced[2], gathered[2], broadcast[2], root_gather;
  const auto run = [&](int rank) {
    auto comm = ConnectNccl({.rank = rank, .world_size = 2, .device = TwoRankDevice(rank)}, store);
    ASSERT_TRUE(comm.ok()) << comm.status();
    std::vector<float> host(kN);
    for (int64_t i = 0; i < kN; ++i) host[i] = value(rank, i);
    float *x = nullptr, *y = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x), kN * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&y), 2 * kN * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(x, host.data(), kN * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_TRUE((*comm)->AllGather(x, kN, y).ok());
    gathered[rank] = Download(y, 2 * kN);
    ASSERT_TRUE((*comm)->Gather(x, kN, y, 0).ok());
    if (rank == 0) root_gather = Download(y, 2 * kN);
    ASSERT_TRUE((*comm)->AllReduceSum(x, kN).ok());
    reduced[rank] = Download(x, kN);
    ASSERT_TRUE((*comm)->Broadcast(x, kN * sizeof(float), 1).ok());
    broadcast[rank] = Download(x, kN);
    ASSERT_TRUE((*comm)->Barrier().ok());
    comm->reset();
    cudaFree(x);
    cudaFree(y);
  };
  std::thread peer(run, 1);
  // Rank 1 asks the store for the unique id before rank 0 has published it.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  run(0);
  peer.join();
  std::vector<float> sum(kN), both(2 * kN);
  for (int64_t i = 0; i < kN; ++i) {
    sum[i] = value(0, i) + value(1, i);
    both[i] = value(0, i);
    both[kN + i] = value(1, i);
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(reduced[r], sum) << "rank " << r;
    EXPECT_EQ(gathered[r], both) << "rank " << r;
    EXPECT_EQ(broadcast[r], sum) << "rank " << r;  // rank 1's sum, the same
  }
  EXPECT_EQ(root_gather, both);
}

#ifdef PAGELLM_NCCL_EMULATED
// The emulated NCCL's contract (kernels/cuda/emu/nccl.cc): a collective whose peer never comes
// fails after CUDA_EMU_NCCL_TIMEOUT_S, and the communicator is then broken, as it is on a timeout
// or a peer's failure on the GPU; and ranks whose collectives differ both fail instead of mixing
// buffers.
TEST(NcclCommunicatorTest, EmulatedPeersThatDoNotMeetFailInsteadOfHanging) {
  setenv("CUDA_EMU_NCCL_TIMEOUT_S", "1", 1);
  gloo::rendezvous::HashStore store;
  constexpr int64_t kN = 64;
  absl::Status mismatch[2], alone;
  const auto run = [&](int rank) {
    auto comm = ConnectNccl({.rank = rank, .world_size = 2}, store);
    ASSERT_TRUE(comm.ok()) << comm.status();
    float* x = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x), 2 * kN * sizeof(float)), cudaSuccess);
    mismatch[rank] = (*comm)->AllReduceSum(x, rank == 0 ? kN : kN + 1);
    if (rank == 0) {
      alone = (*comm)->AllReduceSum(x, kN);  // already broken: fails at once
    }
    comm->reset();
    cudaFree(x);
  };
  std::thread peer(run, 1);
  run(0);
  peer.join();
  EXPECT_EQ(mismatch[0].code(), absl::StatusCode::kUnavailable) << mismatch[0];
  EXPECT_EQ(mismatch[1].code(), absl::StatusCode::kUnavailable) << mismatch[1];
  EXPECT_FALSE(alone.ok());

  gloo::rendezvous::HashStore store2;
  const auto start = std::chrono::steady_clock::now();
  std::thread idle([&] {
    auto comm = ConnectNccl({.rank = 1, .world_size = 2}, store2);
    ASSERT_TRUE(comm.ok()) << comm.status();
  });  // joins, then destroys its communicator without a collective
  auto comm = ConnectNccl({.rank = 0, .world_size = 2}, store2);
  ASSERT_TRUE(comm.ok()) << comm.status();
  idle.join();
  float* x = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x), kN * sizeof(float)), cudaSuccess);
  EXPECT_EQ((*comm)->AllReduceSum(x, kN).code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  cudaFree(x);
  unsetenv("CUDA_EMU_NCCL_TIMEOUT_S");
}
#endif

TEST(NcclCommunicatorTest, ARankOutsideTheGroupIsRefused) {
  gloo::rendezvous::HashStore store;
  NcclOptions o;
  o.rank = 1;
  EXPECT_EQ(ConnectNccl(o, store, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagellm
