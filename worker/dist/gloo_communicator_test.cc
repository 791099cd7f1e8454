#include "worker/dist/gloo_communicator.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/dist/rendezvous.h"

namespace pagellm {
namespace {

using RankFn = std::function<void(Communicator&)>;

GlooOptions Rank(int rank, int world, absl::Duration timeout = absl::Seconds(20)) {
  GlooOptions o;
  o.rank = rank;
  o.world_size = world;
  o.timeout = timeout;
  return o;
}

// Connects `world` ranks on threads through one in-process store and runs fn on each.
void RunGroup(int world, const RankFn& fn, absl::Duration timeout = absl::Seconds(20)) {
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto comm = ConnectGloo(Rank(r, world, timeout), store);
      ASSERT_TRUE(comm.ok()) << comm.status();
      fn(**comm);
    });
  }
  for (std::thread& t : threads) t.join();
}

class GlooCommunicatorTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooCommunicatorTest, AllReduceSumGivesEveryRankTheSameSum) {
  const int world = GetParam();
  constexpr int64_t kN = 100003;  // several ring segments, not a multiple of the world size
  std::vector<std::vector<float>> results(world);
  RunGroup(world, [&](Communicator& c) {
    std::vector<float> x(kN);
    for (int64_t i = 0; i < kN; ++i) x[i] = 0.1f * (c.rank() + 1) + 1e-3f * (i % 97);
    ASSERT_TRUE(c.AllReduceSum(x.data(), kN).ok());
    results[c.rank()] = std::move(x);
  });
  for (int64_t i = 0; i < kN; ++i) {
    double exact = 0;
    for (int r = 0; r < world; ++r) exact += double(0.1f * (r + 1) + 1e-3f * (i % 97));
    ASSERT_NEAR(results[0][i], exact, 1e-5 * std::abs(exact)) << i;
  }
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(std::memcmp(results[r].data(), results[0].data(), kN * sizeof(float)), 0)
        << "rank " << r << " differs from rank 0";
  }
}

TEST_P(GlooCommunicatorTest, AllGatherPutsEachRanksSliceInRankOrder) {
  const int world = GetParam();
  constexpr int64_t kN = 1001;
  RunGroup(world, [&](Communicator& c) {
    std::vector<float> in(kN), out(world * kN, -1.0f);
    for (int64_t i = 0; i < kN; ++i) in[i] = 1000.0f * c.rank() + i;
    ASSERT_TRUE(c.AllGather(in.data(), kN, out.data()).ok());
    for (int r = 0; r < world; ++r) {
      for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(out[r * kN + i], 1000.0f * r + i);
    }
  });
}

TEST_P(GlooCommunicatorTest, GatherPutsEachRanksSliceInRankOrderOnTheRootOnly) {
  const int world = GetParam();
  constexpr int64_t kN = 777;
  RunGroup(world, [&](Communicator& c) {
    std::vector<float> in(kN), out(world * kN, -1.0f);
    for (int64_t i = 0; i < kN; ++i) in[i] = 1000.0f * c.rank() + i;
    ASSERT_TRUE(c.Gather(in.data(), kN, c.rank() == 1 ? out.data() : nullptr, 1).ok());
    if (c.rank() != 1) return;
    for (int r = 0; r < world; ++r) {
      for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(out[r * kN + i], 1000.0f * r + i);
    }
  });
}

TEST_P(GlooCommunicatorTest, BroadcastCopiesTheRootsBytes) {
  const int world = GetParam();
  const int root = world - 1;
  RunGroup(world, [&](Communicator& c) {
    std::string msg = c.rank() == root ? std::string(70000, 'x') + "end" : "stale";
    ASSERT_TRUE(c.BroadcastBytes(&msg, root, 1 << 20).ok());
    EXPECT_EQ(msg, std::string(70000, 'x') + "end");
    int64_t v = c.rank() == root ? 42 : 0;
    ASSERT_TRUE(c.Broadcast(&v, sizeof(v), root).ok());
    EXPECT_EQ(v, 42);
  });
}

TEST_P(GlooCommunicatorTest, BroadcastBytesOverTheLimitFailsOnEveryRank) {
  const int world = GetParam();
  RunGroup(world, [&](Communicator& c) {
    std::string msg = c.rank() == 0 ? std::string(2000, 'y') : "";
    const absl::Status s = c.BroadcastBytes(&msg, 0, 1000);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    if (c.rank() != 0) {
      EXPECT_TRUE(msg.empty()) << "a follower allocated the oversized message";
    }
    // The group still works: the size check happens on every rank before any payload moves.
    float x = 1.0f;
    ASSERT_TRUE(c.AllReduceSum(&x, 1).ok());
    EXPECT_EQ(x, float(world));
  });
}

TEST_P(GlooCommunicatorTest, BarrierWaitsForEveryRank) {
  const int world = GetParam();
  std::atomic<int> arrived{0};
  RunGroup(world, [&](Communicator& c) {
    if (c.rank() != 0) absl::SleepFor(absl::Milliseconds(50));  // the others come late
    arrived.fetch_add(1);
    ASSERT_TRUE(c.Barrier().ok());
    EXPECT_EQ(arrived.load(), world);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooCommunicatorTest, ::testing::Values(2, 3, 4));

TEST(GlooConnectTest, RejectsARankOutsideTheGroup) {
  gloo::rendezvous::HashStore store;
  EXPECT_EQ(ConnectGloo(Rank(2, 2), store).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConnectGloo(Rank(-1, 2), store).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConnectGloo(Rank(0, 0), store).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GlooConnectTest, TimesOutWhenARankNeverJoins) {
  gloo::rendezvous::HashStore store;
  const absl::Time start = absl::Now();
  auto comm = ConnectGloo(Rank(0, 2, absl::Milliseconds(500)), store);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(GlooFailureTest, ACollectiveAPeerSkipsTimesOutAndTheGroupStaysBroken) {
  absl::Notification done;
  RunGroup(
      2,
      [&](Communicator& c) {
        if (c.rank() == 1) {  // alive, but never joins the all-reduce
          done.WaitForNotification();
          return;
        }
        float x = 1.0f;
        const absl::Time start = absl::Now();
        const absl::Status s = c.AllReduceSum(&x, 1);
        EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
        EXPECT_LT(absl::Now() - start, absl::Seconds(5));
        const absl::Time again = absl::Now();
        EXPECT_EQ(c.Barrier(), s) << "a broken group must fail with its first error";
        EXPECT_LT(absl::Now() - again, absl::Milliseconds(100));
        done.Notify();
      },
      absl::Milliseconds(500));
}

TEST(GlooFailureTest, APeerThatGoesAwayFailsTheCollectiveWithinTheTimeout) {
  RunGroup(
      2,
      [&](Communicator& c) {
        // Both ranks are connected after the barrier (without it, rank 1 could go before rank
        // 0's side of the connection was set up, and rank 0's ConnectGloo would fail instead).
        ASSERT_TRUE(c.Barrier().ok());
        if (c.rank() == 1) return;  // the communicator is destroyed: its connections close
        absl::SleepFor(absl::Milliseconds(100));
        std::vector<float> x(1 << 16, 1.0f);
        const absl::Time start = absl::Now();
        const absl::Status s = c.AllReduceSum(x.data(), x.size());
        EXPECT_TRUE(s.code() == absl::StatusCode::kUnavailable ||
                    s.code() == absl::StatusCode::kDeadlineExceeded)
            << s;
        EXPECT_LT(absl::Now() - start, absl::Seconds(5));
      },
      absl::Seconds(2));
}

TEST(GlooRendezvousTest, RanksFindEachOtherThroughRankZerosServer) {
  auto server = RendezvousServer::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string target = "127.0.0.1:" + std::to_string((*server)->port());
  constexpr int kWorld = 3;
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      auto store = MakeRendezvousStore(target, absl::Seconds(20));
      auto comm = ConnectGloo(Rank(r, kWorld), *store);
      ASSERT_TRUE(comm.ok()) << comm.status();
      float x = r + 1.0f;
      ASSERT_TRUE((*comm)->AllReduceSum(&x, 1).ok());
      EXPECT_EQ(x, 6.0f);
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(SingleRankCommunicatorTest, EveryCollectiveIsTheIdentity) {
  std::unique_ptr<Communicator> c = MakeSingleRankCommunicator();
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->world_size(), 1);
  float x[2] = {1.5f, -2.0f}, y[2];
  ASSERT_TRUE(c->AllReduceSum(x, 2).ok());
  EXPECT_EQ(x[0], 1.5f);
  ASSERT_TRUE(c->AllGather(x, 2, y).ok());
  EXPECT_EQ(y[1], -2.0f);
  std::string msg = "hello";
  ASSERT_TRUE(c->BroadcastBytes(&msg, 0, 16).ok());
  EXPECT_EQ(msg, "hello");
  EXPECT_EQ(c->BroadcastBytes(&msg, 0, 2).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagellm
