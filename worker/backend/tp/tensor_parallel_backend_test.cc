// The leader/follower protocol over Gloo on threads, with scripted backends (no model): every
// rank must see the same contexts through its own KV pool -- the same batches, slots, block
// tables and copies in the same order -- and a lost rank must fail the group, never hang it.
// tests/tensor_parallel_test.cc runs real model slices through the engine.
#include "worker/backend/tp/tensor_parallel_backend.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/backend/step_arrays.h"
#include "worker/backend/testing/scripted_backend.h"
#include "worker/dist/gloo_communicator.h"
#include "worker/model/lora_adapter.h"

namespace pagellm {
namespace {

using testing::ScriptedBackend;
using testing::ScriptedBackendOptions;

constexpr int64_t kBlock = 4, kStride = 128;  // ScriptedBackend's default context is 512

// One sequence's step: tokens `ids` at positions start.., blocks `blocks`; logits of the last.
struct Step {
  StepArrays arrays{kBlock, kStride};
  Step(std::vector<int32_t> tokens, int32_t start, std::vector<int32_t> blocks) {
    arrays.AddRow(tokens, start, blocks);
  }
  ForwardBatch batch() const { return arrays.batch(); }
};

// Every context each rank's backend was asked for, in order.
struct Seen {
  absl::Mutex mu;
  std::vector<std::vector<std::vector<int32_t>>> contexts;
};

std::unique_ptr<ScriptedBackend> Backend(int rank, Seen* seen, int64_t blocks = 16) {
  ScriptedBackendOptions o;
  o.adapter_slots = 2;
  o.block_size = kBlock;
  o.num_kv_blocks = blocks;
  o.num_swap_blocks = 4;
  auto b = std::make_unique<ScriptedBackend>(o);
  b->SetRule([seen, rank](std::span<const int32_t> context, std::span<float> row) {
    absl::MutexLock lock(&seen->mu);
    seen->contexts[rank].emplace_back(context.begin(), context.end());
    std::fill(row.begin(), row.end(), 0.0f);
    row[context.size() % row.size()] = 1.0f;
  });
  return b;
}

std::shared_ptr<const LoraAdapter> Adapter(const std::string& name, const std::string& path) {
  auto a = std::make_shared<LoraAdapter>();
  a->name = name;
  a->path = path;
  return a;
}

// A group of `world` ranks on threads: followers (with `follower_blocks` KV blocks, and an
// injected failure of their first step when `fail_follower_step`) run their loop; the leader is
// built from rank 0. Each rank has two adapter slots; a follower reads any adapter path but
// "bad", which rank 2 cannot read.
class Group {
 public:
  Group(int world, absl::Duration timeout, absl::Duration heartbeat, int64_t follower_blocks = 16,
        bool fail_follower_step = false) {
    seen_.contexts.resize(world);
    results_.resize(world);
    for (int r = 1; r < world; ++r) {
      followers_.emplace_back([=, this] {
        auto comm = ConnectGloo(Options(r, world, timeout), store_);
        ASSERT_TRUE(comm.ok()) << comm.status();
        auto backend = Backend(r, &seen_, follower_blocks);
        if (fail_follower_step) backend->FailNextForward(absl::InternalError("injected"));
        results_[r] = RunTensorParallelFollower(
            backend.get(), comm->get(),
            [r, this](
                const LoraModuleSpec& spec) -> absl::StatusOr<std::shared_ptr<const LoraAdapter>> {
              if (r == 2 && spec.path == "bad") return absl::NotFoundError("no such directory");
              std::shared_ptr<const LoraAdapter> a = Adapter(spec.name, spec.path);
              absl::MutexLock lock(&reads_mu_);
              reads_.push_back(a);
              return a;
            });
      });  // the communicator closes its connections here
    }
    auto comm = ConnectGloo(Options(0, world, timeout), store_);
    EXPECT_TRUE(comm.ok()) << comm.status();
    TensorParallelOptions o;
    o.heartbeat = heartbeat;
    if (comm.ok()) leader_ = MakeTensorParallelLeader(Backend(0, &seen_), std::move(*comm), o);
  }
  ~Group() { Join(); }
  void Join() {
    if (leader_.ok()) leader_->reset();
    for (std::thread& t : followers_) {
      if (t.joinable()) t.join();
    }
  }

  absl::StatusOr<std::unique_ptr<pagellm::Backend>>& leader() { return leader_; }
  const std::vector<std::vector<std::vector<int32_t>>>& contexts() { return seen_.contexts; }
  const absl::Status& follower_result(int r) const { return results_[r]; }
  // Adapters the followers read from a path so far, and how many of those named `name` some
  // rank still holds.
  int64_t reads() {
    absl::MutexLock lock(&reads_mu_);
    return static_cast<int64_t>(reads_.size());
  }
  int64_t held(const std::string& name) {
    absl::MutexLock lock(&reads_mu_);
    return std::count_if(reads_.begin(), reads_.end(), [&](const auto& w) {
      auto a = w.lock();
      return a != nullptr && a->name == name;
    });
  }

 private:
  static GlooOptions Options(int rank, int world, absl::Duration timeout) {
    GlooOptions g;
    g.rank = rank;
    g.world_size = world;
    g.timeout = timeout;
    return g;
  }

  gloo::rendezvous::HashStore store_;
  Seen seen_;
  std::vector<absl::Status> results_;
  std::vector<std::thread> followers_;
  absl::Mutex reads_mu_;
  std::vector<std::weak_ptr<const LoraAdapter>> reads_ ABSL_GUARDED_BY(reads_mu_);
  absl::StatusOr<std::unique_ptr<pagellm::Backend>> leader_ = absl::UnknownError("not connected");
};

absl::Status RunStep(pagellm::Backend* b, const Step& s) {
  std::vector<float> logits(b->config().vocab_size);
  return b->ForwardLogits(s.batch(), logits.data());
}

TEST(TensorParallelBackendTest, EveryRankSeesTheSameContextsThroughItsOwnPool) {
  Group g(3, absl::Seconds(20), absl::Seconds(1));
  ASSERT_TRUE(g.leader().ok()) << g.leader().status();
  pagellm::Backend* leader = g.leader()->get();
  EXPECT_EQ(leader->num_kv_blocks(), 16);
  EXPECT_NE(leader->name().find("x3"), std::string::npos) << leader->name();
  // A prompt in blocks 7 and 2, a copy-on-write of block 2 into 9, a decode through the copy,
  // a swap-out of block 9 and a swap-in into block 11, another decode through that.
  ASSERT_TRUE(RunStep(leader, Step({5, 6, 7, 8, 9, 10}, 0, {7, 2})).ok());
  const KvCopy cow[] = {{KvCopy::Kind::kDeviceToDevice, 2, 9}};
  ASSERT_TRUE(leader->CopyKv(cow).ok());
  ASSERT_TRUE(RunStep(leader, Step({11}, 6, {7, 9})).ok());
  const KvCopy out[] = {{KvCopy::Kind::kDeviceToSwap, 9, 1}};
  ASSERT_TRUE(leader->CopyKv(out).ok());
  const KvCopy in[] = {{KvCopy::Kind::kSwapToDevice, 1, 11}};
  ASSERT_TRUE(leader->CopyKv(in).ok());
  ASSERT_TRUE(RunStep(leader, Step({12}, 7, {7, 11})).ok());
  EXPECT_TRUE(leader->health().ok());
  g.Join();
  EXPECT_TRUE(g.follower_result(1).ok()) << g.follower_result(1);
  EXPECT_TRUE(g.follower_result(2).ok()) << g.follower_result(2);
  const std::vector<std::vector<int32_t>> want = {
      {5, 6, 7, 8, 9, 10}, {5, 6, 7, 8, 9, 10, 11}, {5, 6, 7, 8, 9, 10, 11, 12}};
  EXPECT_EQ(g.contexts()[0], want);
  EXPECT_EQ(g.contexts()[1], want);
  EXPECT_EQ(g.contexts()[2], want);
}

TEST(TensorParallelBackendTest, ABatchTheBackendRefusesLeavesTheGroupWorking) {
  Group g(2, absl::Seconds(20), absl::Seconds(1));
  ASSERT_TRUE(g.leader().ok()) << g.leader().status();
  pagellm::Backend* leader = g.leader()->get();
  const Step bad({5, 6}, 0, {7});
  ForwardBatch b = bad.batch();
  const int64_t wrong_slots[] = {7 * kBlock, 3};  // the second is not where its table says
  b.slots = wrong_slots;
  std::vector<float> logits(leader->config().vocab_size);
  EXPECT_EQ(leader->ForwardLogits(b, logits.data()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(RunStep(leader, Step({5, 6}, 0, {7})).ok());
  EXPECT_TRUE(leader->health().ok());
}

TEST(TensorParallelBackendTest, HeartbeatsKeepAnIdleGroupAlive) {
  // Idle for three times the communicator's timeout: followers hear a heartbeat every 50 ms.
  Group g(2, absl::Milliseconds(500), absl::Milliseconds(50));
  ASSERT_TRUE(g.leader().ok()) << g.leader().status();
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_TRUE(RunStep(g.leader()->get(), Step({5, 6}, 0, {7})).ok());
  g.Join();
  EXPECT_TRUE(g.follower_result(1).ok()) << g.follower_result(1);
}

TEST(TensorParallelBackendTest, AFollowerThatFailsBreaksTheGroupAtTheNextStep) {
  Group g(2, absl::Seconds(2), absl::Seconds(10), 16, /*fail_follower_step=*/true);
  ASSERT_TRUE(g.leader().ok()) << g.leader().status();
  pagellm::Backend* leader = g.leader()->get();
  EXPECT_TRUE(
      RunStep(leader, Step({5, 6}, 0, {7})).ok());  // the follower fails this one and leaves
  const absl::Time start = absl::Now();
  absl::Status s;
  for (int i = 0; i < 3 && s.ok(); ++i) s = RunStep(leader, Step({5, 6, 7}, 0, {7}));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(leader->health().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(RunStep(leader, Step({5}, 0, {7})).code(), absl::StatusCode::kUnavailable);
  g.Join();
  EXPECT_EQ(g.follower_result(1).code(), absl::StatusCode::kInternal);
}

TEST(TensorParallelBackendTest, AnAdapterChangeReachesEveryRankOrNone) {
  Group g(3, absl::Seconds(20), absl::Seconds(1));
  ASSERT_TRUE(g.leader().ok()) << g.leader().status();
  pagellm::Backend* leader = g.leader()->get();
  ASSERT_TRUE(leader->adapters_can_change());
  ASSERT_TRUE(leader->SetAdapter(0, Adapter("sql", "ok")).ok());
  EXPECT_EQ(leader->adapter_names(), (std::vector<std::string>{"sql", ""}));
  // Rank 2 cannot read it: the group refuses the change, and every rank that took it lets go.
  const absl::Status refused = leader->SetAdapter(1, Adapter("chat", "bad"));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("rank 2"), std::string::npos) << refused;
  EXPECT_EQ(leader->adapter_names(), (std::vector<std::string>{"sql", ""}));
  // Slot 1 is empty on rank 1 again (it would refuse a second adapter otherwise).
  EXPECT_TRUE(leader->SetAdapter(1, Adapter("chat", "ok")).ok());
  EXPECT_TRUE(leader->SetAdapter(0, nullptr).ok());
  EXPECT_EQ(leader->adapter_names(), (std::vector<std::string>{"", "chat"}));
  // A change the leader's own backend refuses is refused by every rank: still in step.
  EXPECT_EQ(leader->SetAdapter(1, Adapter("x", "ok")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(RunStep(leader, Step({5, 6}, 0, {7})).ok());
  EXPECT_TRUE(leader->health().ok());
  g.Join();
  EXPECT_TRUE(g.follower_result(1).ok()) << g.follower_result(1);
  EXPECT_TRUE(g.follower_result(2).ok()) << g.follower_result(2);
}

TEST(TensorParallelBackendTest, FollowersReadAnAdapterOnceWhileTheLeaderHoldsIt) {
  Group g(3, absl::Seconds(20), absl::Seconds(1));
  ASSERT_TRUE(g.leader().ok()) << g.leader().status();
  pagellm::Backend* leader = g.leader()->get();
  std::shared_ptr<const LoraAdapter> sql = Adapter("sql", "ok");
  ASSERT_TRUE(leader->SetAdapter(0, sql).ok());
  EXPECT_EQ(g.reads(), 2);  // ranks 1 and 2
  // Moved to the other slot (an engine serving more adapters than slots): the copies the
  // followers hold serve, read once.
  ASSERT_TRUE(leader->SetAdapter(0, nullptr).ok());
  ASSERT_TRUE(leader->SetAdapter(1, sql).ok());
  EXPECT_EQ(g.reads(), 2);
  // Another adapter under the same name (loaded again, perhaps from changed files): read anew.
  ASSERT_TRUE(leader->SetAdapter(1, nullptr).ok());
  std::shared_ptr<const LoraAdapter> sql2 = Adapter("sql", "ok");
  ASSERT_TRUE(leader->SetAdapter(0, sql2).ok());
  EXPECT_EQ(g.reads(), 4);
  // A new "sql" that rank 2 cannot read: refused, and rank 2 keeps no copy of the old one under
  // the name, so a retry reads again (and is refused again) rather than using the old weights.
  ASSERT_TRUE(leader->SetAdapter(0, nullptr).ok());
  std::shared_ptr<const LoraAdapter> unreadable = Adapter("sql", "bad");
  EXPECT_EQ(leader->SetAdapter(0, unreadable).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(leader->SetAdapter(0, unreadable).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(leader->SetAdapter(0, sql2).ok());  // sql2 again: read anew on every follower
  // Once the leader lets go of it, the followers drop their copies at the next change.
  ASSERT_TRUE(leader->SetAdapter(0, nullptr).ok());
  sql.reset();
  sql2.reset();
  ASSERT_TRUE(leader->SetAdapter(1, Adapter("chat", "ok")).ok());
  EXPECT_EQ(g.held("sql"), 0);
  EXPECT_TRUE(leader->health().ok());
  g.Join();
  EXPECT_TRUE(g.follower_result(1).ok()) << g.follower_result(1);
}

TEST(TensorParallelBackendTest, RanksWhosePoolsDifferAreRefused) {
  Group g(2, absl::Seconds(20), absl::Seconds(1), /*follower_blocks=*/32);
  EXPECT_EQ(g.leader().status().code(), absl::StatusCode::kFailedPrecondition)
      << g.leader().status();
  g.Join();
  EXPECT_EQ(g.follower_result(1).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace pagellm
