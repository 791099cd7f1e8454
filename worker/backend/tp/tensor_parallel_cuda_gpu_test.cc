// Tensor parallelism on the GPU (skipped without one). The GPU machine for checks has one GPU, and
// NCCL refuses two ranks on one device, so two things are checked there (a third, two NCCL ranks,
// needs two GPUs or the emulator, worker_tensor_parallel_cuda_emu_test):
//   - NCCL at world size 1 runs the tensor-parallel code path (the model's all-reduces enqueued
//     and captured in the decode graphs, the step waited for through the communicator, the leader
//     wrapping the rank) and must give the plain backend's logits and tokens bit for bit;
//   - two ranks on the one GPU, each holding half of the heads, the MLP and the vocabulary, run as
//     a group (leader and follower threads) whose model collectives are staged through the host
//     over Gloo: the sharded forward pass (slices, vocabulary-parallel embedding and LM head,
//     all-reduces, all-gather and interleave) must give one rank's logits to bf16 accuracy.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/testing/gpu_test_model.h"
#include "worker/backend/step_arrays.h"
#include "worker/backend/tp/tensor_parallel_backend.h"
#include "worker/dist/gloo_communicator.h"
#include "worker/dist/nccl_communicator.h"
#include "worker/model/testing/tiny_model.h"

namespace pagellm {
namespace {

using testing::HasGpu;
using testing::RelativeError;

// 2 divides the vocabulary: the embedding and LM head are vocabulary-parallel.
ModelConfig SmallConfig(bool qwen2) { return testing::SmallGpuConfig(qwen2); }

absl::Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

// A test double of the device communicator: every collective waits for the stream, copies the
// device buffer to the host, runs the host communicator's collective (Gloo) and copies back.
// Correct, not fast, and not capturable: the backends over it run eagerly.
class HostStagedDeviceCommunicator final : public DeviceCommunicator {
 public:
  explicit HostStagedDeviceCommunicator(Communicator* host) : host_(host) {}

  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }

  absl::Status AllReduceSum(float* data, int64_t n) override {
    return EnqueueAllReduceSum(data, n, CollectiveDtype::kF32, nullptr);
  }
  absl::Status AllGather(const float* in, int64_t n, float* out) override {
    return EnqueueAllGather(in, n, CollectiveDtype::kF32, out, nullptr);
  }
  absl::Status Gather(const float*, int64_t, float*, int) override {
    return absl::UnimplementedError("not staged");
  }
  absl::Status Broadcast(void*, int64_t, int) override {
    return absl::UnimplementedError("not staged");
  }
  absl::Status Barrier() override { return host_->Barrier(); }

  absl::Status EnqueueAllReduceSum(void* data, int64_t n, CollectiveDtype dtype,
                                   void* stream) override {
    if (dtype == CollectiveDtype::kF16) return absl::UnimplementedError("fp16 is not staged");
    RETURN_IF_ERROR(WaitStream(stream));
    std::vector<float> host(n);
    if (dtype == CollectiveDtype::kF32) {
      RETURN_IF_ERROR(Cuda(cudaMemcpy(host.data(), data, n * 4, cudaMemcpyDeviceToHost), "d2h"));
      RETURN_IF_ERROR(host_->AllReduceSum(host.data(), n));
      return Cuda(cudaMemcpy(data, host.data(), n * 4, cudaMemcpyHostToDevice), "h2d");
    }
    std::vector<uint16_t> half(n);
    RETURN_IF_ERROR(Cuda(cudaMemcpy(half.data(), data, n * 2, cudaMemcpyDeviceToHost), "d2h"));
    for (int64_t i = 0; i < n; ++i) host[i] = Bf16ToFloat(half[i]);
    RETURN_IF_ERROR(host_->AllReduceSum(host.data(), n));
    for (int64_t i = 0; i < n; ++i) half[i] = FloatToBf16(host[i]);
    return Cuda(cudaMemcpy(data, half.data(), n * 2, cudaMemcpyHostToDevice), "h2d");
  }

  absl::Status EnqueueAllGather(const void* in, int64_t n, CollectiveDtype dtype, void* out,
                                void* stream) override {
    if (dtype != CollectiveDtype::kF32) return absl::UnimplementedError("only fp32 is staged");
    RETURN_IF_ERROR(WaitStream(stream));
    std::vector<float> mine(n), all(n * world_size());
    RETURN_IF_ERROR(Cuda(cudaMemcpy(mine.data(), in, n * 4, cudaMemcpyDeviceToHost), "d2h"));
    RETURN_IF_ERROR(host_->AllGather(mine.data(), n, all.data()));
    return Cuda(cudaMemcpy(out, all.data(), all.size() * 4, cudaMemcpyHostToDevice), "h2d");
  }

  absl::Status WaitStream(void* stream) override {
    return Cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "stream");
  }

 private:
  Communicator* host_;
};

// One sequence per entry; each step appends tokens to some of them.
using Plan = std::vector<std::vector<std::pair<int, std::vector<int32_t>>>>;

Plan MakePlan(int seqs, uint32_t seed) {
  std::mt19937 rng(seed);
  auto tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % 512);
    return t;
  };
  Plan plan;
  std::vector<std::pair<int, std::vector<int32_t>>> prefill;
  for (int s = 0; s < seqs; ++s) prefill.push_back({s, tokens(17 + 41 * s)});
  plan.push_back(prefill);
  plan.push_back({{0, tokens(70)}, {1, tokens(1)}});  // a chunk beside a decode token
  for (int i = 0; i < 5; ++i) {
    std::vector<std::pair<int, std::vector<int32_t>>> step;
    for (int s = 0; s < seqs; ++s) step.push_back({s, tokens(1)});
    plan.push_back(step);
  }
  return plan;
}

// Runs `plan` on a sequence-per-row block layout (the same block ids for every backend).
class Runner {
 public:
  explicit Runner(const ModelConfig& c) : step_(16, c.max_position_embeddings / 16) {}
  ForwardBatch Build(const std::vector<std::pair<int, std::vector<int32_t>>>& rows) {
    step_.Clear();
    for (const auto& [s, tokens] : rows) {
      if (s >= static_cast<int>(seqs_.size())) seqs_.resize(s + 1);
      Seq& q = seqs_[s];
      while (static_cast<int64_t>(q.blocks.size()) * 16 <
             q.len + static_cast<int64_t>(tokens.size()))
        q.blocks.push_back(next_block_++);
      step_.AddRow(tokens, q.len, q.blocks);
      q.len += static_cast<int32_t>(tokens.size());
    }
    return step_.batch();
  }

 private:
  struct Seq {
    std::vector<int32_t> blocks;
    int32_t len = 0;
  };
  StepArrays step_;
  std::vector<Seq> seqs_;
  int32_t next_block_ = 0;
};

// Every step's logits, in order.
std::vector<std::vector<float>> RunLogits(Backend& b, const ModelConfig& c, const Plan& plan) {
  Runner r(c);
  std::vector<std::vector<float>> out;
  for (const auto& rows : plan) {
    const ForwardBatch& batch = r.Build(rows);
    std::vector<float> logits(batch.num_logits * c.vocab_size, NAN);
    const absl::Status s = b.ForwardLogits(batch, logits.data());
    EXPECT_TRUE(s.ok()) << s;
    out.push_back(std::move(logits));
  }
  return out;
}

// Every step's greedy tokens, in order.
std::vector<std::vector<int32_t>> RunGreedy(Backend& b, const ModelConfig& c, const Plan& plan) {
  Runner r(c);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.ignore_eos = true;
  std::vector<std::vector<int32_t>> out;
  for (const auto& rows : plan) {
    const ForwardBatch& batch = r.Build(rows);
    std::vector<SamplingRow> srows(batch.num_logits);
    for (int64_t i = 0; i < batch.num_logits; ++i) {
      srows[i].logits_row = static_cast<int32_t>(i);
      srows[i].seq.params = &greedy;
    }
    SamplerOutput got;
    const absl::Status s = b.Forward(batch, SamplingBatch{absl::MakeConstSpan(srows), {}}, &got);
    EXPECT_TRUE(s.ok()) << s;
    std::vector<int32_t> tokens;
    for (const SampledRow& row : got.rows) tokens.push_back(row.result.token_id);
    out.push_back(std::move(tokens));
  }
  return out;
}

// 128 KV blocks, and decode graphs on (a step size is set): a group's all-reduces are captured.
CudaBackendOptions GraphOptions() {
  CudaBackendOptions o;
  o.num_kv_blocks = 128;
  o.max_batch_tokens = 512;
  return o;
}

class CudaTensorParallelTest : public ::testing::TestWithParam<bool> {};

TEST_P(CudaTensorParallelTest, NcclGroupOfOneIsBitIdenticalToThePlainBackend) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig cfg = SmallConfig(GetParam());
  auto ckpt = testing::TinyCheckpoint(GgmlType::kBF16, cfg, 21);
  ASSERT_NE(ckpt, nullptr);
  const CudaBackendOptions go = GraphOptions();
  auto plain = CreateCudaBackend(ckpt, go);
  ASSERT_TRUE(plain.ok()) << plain.status();

  gloo::rendezvous::HashStore store;
  auto nccl = ConnectNccl({}, store);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  CudaBackendOptions tp = go;
  tp.communicator = nccl->get();
  auto rank0 = CreateCudaBackend(ckpt, tp);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  auto group = MakeTensorParallelLeader(*std::move(rank0), MakeSingleRankCommunicator(), {},
                                        *std::move(nccl));
  ASSERT_TRUE(group.ok()) << group.status();

  const Plan plan = MakePlan(5, 31);
  const auto want = RunLogits(**plain, cfg, plan), got = RunLogits(**group, cfg, plan);
  for (size_t i = 0; i < plan.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
  const Plan again = MakePlan(3, 32);
  EXPECT_EQ(RunGreedy(**group, cfg, again), RunGreedy(**plain, cfg, again));
}

// Each rank's device communicator, given its rank and its host communicator (Gloo).
using MakeDeviceComm = std::function<absl::StatusOr<std::unique_ptr<DeviceCommunicator>>(
    int rank, Communicator* host)>;

// Runs `lead` on the leader of a two-rank group over `store`: the follower (rank 1, on
// `follower_device`) serves on a thread until the leader is destroyed. Returns the follower's
// status.
absl::Status RunTwoRankGroup(std::shared_ptr<const ModelCheckpoint> ckpt,
                             const CudaBackendOptions& options, int follower_device,
                             gloo::rendezvous::Store& store, const MakeDeviceComm& make,
                             const std::function<void(Backend&)>& lead) {
  const auto connect = [&](int rank) {
    GlooOptions o;
    o.rank = rank;
    o.world_size = 2;
    return ConnectGloo(o, store);
  };
  absl::Status follower_status = absl::UnknownError("not run");
  std::thread follower([&] {
    follower_status = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(std::unique_ptr<Communicator> gloo, connect(1));
      ASSIGN_OR_RETURN(std::unique_ptr<DeviceCommunicator> device, make(1, gloo.get()));
      CudaBackendOptions r1 = options;
      r1.device_id = follower_device;
      r1.shard = {.rank = 1, .world_size = 2};
      r1.communicator = device.get();
      ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateCudaBackend(ckpt, r1));
      return RunTensorParallelFollower(backend.get(), gloo.get());
    }();
  });
  const absl::Status leader_status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<Communicator> gloo, connect(0));
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceCommunicator> device, make(0, gloo.get()));
    CudaBackendOptions r0 = options;
    r0.shard = {.rank = 0, .world_size = 2};
    r0.communicator = device.get();
    ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateCudaBackend(ckpt, r0));
    ASSIGN_OR_RETURN(
        std::unique_ptr<Backend> group,
        MakeTensorParallelLeader(std::move(backend), std::move(gloo), {}, std::move(device)));
    EXPECT_EQ(group->tensor_parallel_size(), 2);
    lead(*group);
    return absl::OkStatus();
  }();  // the leader stops the follower
  follower.join();
  RETURN_IF_ERROR(leader_status);
  return follower_status;
}

TEST_P(CudaTensorParallelTest, TwoRanksOnOneGpuGiveOneRanksLogits) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig cfg = SmallConfig(GetParam());
  auto ckpt = testing::TinyCheckpoint(GgmlType::kBF16, cfg, 22);
  ASSERT_NE(ckpt, nullptr);
  CudaBackendOptions go = GraphOptions();
  go.enforce_eager = true;  // the staged collectives synchronize: nothing to capture
  auto plain = CreateCudaBackend(ckpt, go);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const Plan plan = MakePlan(5, 33);
  const auto want = RunLogits(**plain, cfg, plan);
  plain->reset();

  gloo::rendezvous::HashStore store;
  std::vector<std::vector<float>> got;
  const absl::Status s = RunTwoRankGroup(
      ckpt, go, /*follower_device=*/0, store,
      [](int, Communicator* host) -> absl::StatusOr<std::unique_ptr<DeviceCommunicator>> {
        return std::make_unique<HostStagedDeviceCommunicator>(host);
      },
      [&](Backend& group) { got = RunLogits(group, cfg, plan); });
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    // Half the heads and the MLP on each rank: the partial sums meet in bf16 all-reduces.
    EXPECT_LT(RelativeError(got[i], want[i]), 2e-2) << "step " << i;
  }
}

// Two NCCL ranks, one per GPU; or, over the emulated device and NCCL (PAGELLM_NCCL_EMULATED), two
// ranks as threads sharing it. Unlike the staged group above, the model's collectives go through
// NCCL and are captured in the decode graphs: the group's whole GPU path with two ranks.
TEST_P(CudaTensorParallelTest, TwoNcclRanksGiveOneRanksLogits) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no CUDA device";
#ifdef PAGELLM_NCCL_EMULATED
  const int follower_device = 0;
#else
  if (devices < 2) GTEST_SKIP() << "one GPU: NCCL needs a device per rank";
  const int follower_device = 1;
#endif
  const ModelConfig cfg = SmallConfig(GetParam());
  auto ckpt = testing::TinyCheckpoint(GgmlType::kBF16, cfg, 23);
  ASSERT_NE(ckpt, nullptr);
  const CudaBackendOptions go = GraphOptions();
  auto plain = CreateCudaBackend(ckpt, go);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const Plan plan = MakePlan(5, 34);
  const auto want = RunLogits(**plain, cfg, plan);
  const Plan again = MakePlan(3, 35);
  const auto want_tokens = RunGreedy(**plain, cfg, again);
  plain->reset();

  gloo::rendezvous::HashStore store;
  std::vector<std::vector<float>> got;
  std::vector<std::vector<int32_t>> got_tokens;
  const absl::Status s = RunTwoRankGroup(
      ckpt, go, follower_device, store,
      [&](int rank, Communicator*) {
        return ConnectNccl(
            {.rank = rank, .world_size = 2, .device = rank == 0 ? 0 : follower_device}, store);
      },
      [&](Backend& group) {
        got = RunLogits(group, cfg, plan);
        got_tokens = RunGreedy(group, cfg, again);
      });
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_LT(RelativeError(got[i], want[i]), 2e-2) << "step " << i;
  }
  // Random weights leave close logits: count agreements rather than demand every token.
  int same = 0, total = 0;
  for (size_t i = 0; i < again.size(); ++i) {
    for (size_t j = 0; j < want_tokens[i].size(); ++j) {
      ++total;
      same += j < got_tokens[i].size() && got_tokens[i][j] == want_tokens[i][j];
    }
  }
  EXPECT_GE(same, total * 8 / 10) << same << " of " << total;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaTensorParallelTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "qwen2" : "llama"; });

}  // namespace
}  // namespace pagellm
