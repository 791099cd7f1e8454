#include "router/worker_pool.h"

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/prefix_cache/block_hash.h"
#include "common/prefix_cache/prefix_filter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/testing/fake_worker.h"
#include "router/testing/slow_handshake_relay.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace pagellm {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using testing::FakeWorker;
using ::testing::UnorderedElementsAre;

using testing::Load;
using testing::SlowHandshakeRelay;
using testing::WaitFor;

class WorkerPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = FakeWorker::Start({});
    b_ = FakeWorker::Start({});
  }

  std::unique_ptr<WorkerPool> MakePool(WorkerPool::Options o) {
    auto pool = WorkerPool::Create(std::move(o), [this] { ++changes_; });
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? *std::move(pool) : nullptr;
  }

  std::unique_ptr<WorkerPool> MakePool() {
    WorkerPool::Options o;
    o.addresses = {a_->address(), b_->address()};
    return MakePool(std::move(o));
  }

  // Polls until `ready` workers are ready.
  static bool PollUntilReady(WorkerPool& pool, int ready) {
    return WaitFor([&] {
      pool.PollAll();
      return pool.GetStats().ready == ready;
    });
  }

  // Places a request of `tokens` prompt tokens (block size 4: tokens/4 + 1 blocks).
  static Placer::Decision Place(WorkerPool& pool, int64_t tokens, Placement* p,
                                absl::Status* error = nullptr,
                                const WorkerEndpoint* avoid = nullptr) {
    AdmissionTicket t;
    t.prompt_tokens = tokens;
    t.avoid = avoid;
    absl::Status ignored;
    return pool.Place(t, p, error ? error : &ignored);
  }

  // Places `prompt` itself (cache-aware placement sees its tokens).
  static Placer::Decision PlacePrompt(WorkerPool& pool, const std::vector<int32_t>& prompt,
                                      Placement* p, uint64_t cache_namespace = 0,
                                      bool reuses_cached_prefix = true) {
    AdmissionTicket t;
    t.prompt_tokens = static_cast<int64_t>(prompt.size());
    t.prompt_ids = prompt;
    t.cache_namespace = cache_namespace;
    t.reuses_cached_prefix = reuses_cached_prefix;
    absl::Status ignored;
    return pool.Place(t, p, &ignored);
  }

  // `load` reporting a prefix cache that holds exactly `prompts` (block size 4, as FakeWorker's).
  static v1::WorkerLoad WithCached(v1::WorkerLoad load,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   uint64_t version = 41) {
    CountingPrefixFilter filter(load.kv_blocks_total(), version);
    for (const auto& prompt : prompts) {
      for (uint64_t h : PrefixBlockHashes(prompt, 4, 0)) filter.Add(h);
    }
    load.set_prefix_filter_version(filter.Snapshot(load.mutable_prefix_filter()));
    load.set_prefix_filter_hashes(kPrefixFilterHashes);
    return load;
  }

  // Polls until two polls of `worker` sent after now have been answered (and a third sent).
  static bool PollsAfterNow(WorkerPool& pool, const FakeWorker& worker) {
    const int calls = worker.get_load_calls();
    return WaitFor([&] {
      pool.PollAll();
      return worker.get_load_calls() >= calls + 3;
    });
  }

  static std::vector<int32_t> Prompt(int tokens, int32_t first) {
    std::vector<int32_t> p(tokens);
    for (int i = 0; i < tokens; ++i) p[i] = first + i % 200;
    return p;
  }

  // a and b serve "sql", loaded at run time from adapters/sql, and poll as processes started
  // with `start_id`. Returns their model info (listing "sql").
  v1::ModelInfo BothLoadedSql(uint64_t start_id) {
    v1::ModelInfo with_sql = FakeWorker::DefaultInfo();
    with_sql.add_lora_adapters("sql");
    v1::WorkerLoad loaded = Load(100);
    loaded.set_start_id(start_id);
    v1::LoadLoraAdapterRequest* sql = loaded.add_runtime_lora_adapters();
    sql->set_lora_name("sql");
    sql->set_lora_path("adapters/sql");
    for (FakeWorker* w : {a_.get(), b_.get()}) {
      w->SetInfo(with_sql);
      w->SetLoad(loaded);
    }
    return with_sql;
  }

  std::unique_ptr<FakeWorker> a_, b_;
  std::atomic<int> changes_{0};
};

TEST_F(WorkerPoolTest, NeedsAWorkerSource) {
  EXPECT_EQ(WorkerPool::Create({}, [] {}).status().code(), absl::StatusCode::kInvalidArgument);
  WorkerPool::Options o;
  o.dns_target = "no-port";
  EXPECT_EQ(WorkerPool::Create(o, [] {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(WorkerPoolTest, NoReadyWorkerIsUnavailable) {
  auto pool = MakePool();
  Placement p;
  absl::Status error;
  EXPECT_EQ(Place(*pool, 4, &p, &error), Placer::Decision::kReject);
  EXPECT_EQ(error.code(), absl::StatusCode::kUnavailable);
}

TEST_F(WorkerPoolTest, PollsMakeWorkersReadyAndFailedPollsTakeThemOut) {
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  EXPECT_GT(changes_.load(), 0);
  a_->SetGetLoadFails(true);
  ASSERT_TRUE(PollUntilReady(*pool, 1));
  a_->SetGetLoadFails(false);
  ASSERT_TRUE(PollUntilReady(*pool, 2));
}

TEST_F(WorkerPoolTest, PlacesOnMostFreeBlocksCountingReservations) {
  a_->SetLoad(Load(100));
  b_->SetLoad(Load(500));
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement p1, p2, p3;
  ASSERT_EQ(Place(*pool, 1200, &p1), Placer::Decision::kPlace);  // 301 blocks
  EXPECT_EQ(p1.worker->address(), b_->address());
  EXPECT_EQ(p1.reserved_blocks, 301);
  ASSERT_EQ(Place(*pool, 600, &p2), Placer::Decision::kPlace);  // 151: b has 199, a 100
  EXPECT_EQ(p2.worker->address(), b_->address());
  EXPECT_EQ(Place(*pool, 600, &p3), Placer::Decision::kWait);  // b 48, a 100
  // A released reservation stays until a poll sent after the release shows the worker's own
  // figure (here still 500 free: the fake worker allocates nothing).
  pool->Release(p1);
  EXPECT_EQ(Place(*pool, 600, &p3), Placer::Decision::kWait);
  ASSERT_TRUE(WaitFor([&] {
    pool->PollAll();
    return Place(*pool, 600, &p3) == Placer::Decision::kPlace;
  }));
  EXPECT_EQ(p3.worker->address(), b_->address());
}

TEST_F(WorkerPoolTest, AWorkerWithItsOwnQueueHasNoRoom) {
  v1::WorkerLoad busy = Load(900);
  busy.set_waiting(1);
  a_->SetLoad(busy);
  b_->SetLoad(Load(100));
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement p;
  ASSERT_EQ(Place(*pool, 4, &p), Placer::Decision::kPlace);
  EXPECT_EQ(p.worker->address(), b_->address());  // fewer free blocks, but nothing waiting
}

// A burst between two polls is not all sent to one worker: requests placed there count against
// the max_num_seqs it reports, and beyond it the rest wait in the router (where a later, more
// urgent request can still go first) until a poll shows room again.
TEST_F(WorkerPoolTest, AWorkerAtItsSequenceCapHasNoRoom) {
  v1::WorkerLoad a = Load(900);
  a.set_max_num_seqs(3);
  a.set_running(1);
  a_->SetLoad(a);
  v1::WorkerLoad b = Load(100);
  b.set_max_num_seqs(1);
  b.set_running(1);
  b_->SetLoad(b);
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement p1, p2, p3;
  ASSERT_EQ(Place(*pool, 4, &p1), Placer::Decision::kPlace);
  ASSERT_EQ(Place(*pool, 4, &p2), Placer::Decision::kPlace);
  EXPECT_EQ(p1.worker->address(), a_->address());
  EXPECT_EQ(p2.worker->address(), a_->address());
  EXPECT_EQ(Place(*pool, 4, &p3), Placer::Decision::kWait);  // a: 1 running + 2 placed; b full
  a.set_max_num_seqs(0);                                     // unknown: no cap
  a_->SetLoad(a);
  ASSERT_TRUE(PollsAfterNow(*pool, *a_));
  ASSERT_EQ(Place(*pool, 4, &p3), Placer::Decision::kPlace);
  EXPECT_EQ(p3.worker->address(), a_->address());
}

// A request that ends frees its place at once: the next queued one need not wait for a poll.
// The credit lasts until a poll sent after the end comes back, which counts it no more.
TEST_F(WorkerPoolTest, AnEndedRequestsPlaceIsFreeBeforeTheNextPoll) {
  v1::WorkerLoad full = Load(900);
  full.set_max_num_seqs(2);
  full.set_running(2);
  a_->SetLoad(full);
  b_->SetLoad(full);
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement p;
  ASSERT_EQ(Place(*pool, 4, &p), Placer::Decision::kWait);
  const std::vector<std::shared_ptr<WorkerEndpoint>> workers = pool->Endpoints();
  WorkerEndpoint* a = nullptr;
  for (const auto& w : workers) {
    if (w->address() == a_->address()) a = w.get();
  }
  ASSERT_NE(a, nullptr);
  const int before = changes_.load();
  pool->Ended(a);  // one of a's two running requests ended
  EXPECT_GT(changes_.load(), before) << "the queue is told";
  ASSERT_EQ(Place(*pool, 4, &p), Placer::Decision::kPlace);
  EXPECT_EQ(p.worker->address(), a_->address());
  Placement q;
  EXPECT_EQ(Place(*pool, 4, &q), Placer::Decision::kWait) << "one place, taken";
  // A poll sent after the end shows 1 running; with p placed and not yet visible, a is full.
  v1::WorkerLoad one = full;
  one.set_running(1);
  a_->SetLoad(one);
  ASSERT_TRUE(PollsAfterNow(*pool, *a_));
  EXPECT_EQ(Place(*pool, 4, &q), Placer::Decision::kWait) << "the credit went with that poll";
}

// A worker publishes its load between steps, so a poll answered during a prompt's first step
// still counts that request as waiting. Once it produced its first response (released) the
// router knows better, until a poll sent after that can tell.
TEST_F(WorkerPoolTest, ARequestThatStartedIsNoLongerCountedAsWaiting) {
  a_->SetLoad(Load(900));
  b_->SetLoad(Load(100));
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement p1, p2, p3, p4;
  ASSERT_EQ(Place(*pool, 4, &p1), Placer::Decision::kPlace);
  ASSERT_EQ(p1.worker->address(), a_->address());
  v1::WorkerLoad busy = Load(900);
  busy.set_waiting(1);  // the poll saw p1 in the worker's queue
  a_->SetLoad(busy);
  ASSERT_TRUE(PollsAfterNow(*pool, *a_));
  ASSERT_EQ(Place(*pool, 4, &p2), Placer::Decision::kPlace);
  EXPECT_EQ(p2.worker->address(), b_->address());
  pool->Release(p1);  // p1's first token came
  ASSERT_EQ(Place(*pool, 4, &p3), Placer::Decision::kPlace);
  EXPECT_EQ(p3.worker->address(), a_->address());
  // A poll sent after the release still reports one waiting: that one is real.
  ASSERT_TRUE(PollsAfterNow(*pool, *a_));
  ASSERT_EQ(Place(*pool, 4, &p4), Placer::Decision::kPlace);
  EXPECT_EQ(p4.worker->address(), b_->address());
}

TEST_F(WorkerPoolTest, RequestLargerThanEveryWorkerIsOutOfRange) {
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement p;
  absl::Status error;
  EXPECT_EQ(Place(*pool, 4000, &p, &error), Placer::Decision::kReject);  // 1001 > 1000 blocks
  EXPECT_EQ(error.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Place(*pool, 3996, &p, &error), Placer::Decision::kPlace);  // exactly 1000
  pool->Release(p);
  // 3,999 tokens and the first new one fill the 1,000 blocks: no room for the usual block to
  // grow into, but the request fits (the soak saw a resumed chat of 757 tokens refused by 48
  // blocks of 16).
  EXPECT_EQ(Place(*pool, 3999, &p, &error), Placer::Decision::kPlace) << error;
}

TEST_F(WorkerPoolTest, AvoidSkipsTheWorkerThatFailed) {
  a_->SetLoad(Load(900));
  b_->SetLoad(Load(100));
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement first, retry;
  ASSERT_EQ(Place(*pool, 4, &first), Placer::Decision::kPlace);
  ASSERT_EQ(first.worker->address(), a_->address());
  ASSERT_EQ(Place(*pool, 4, &retry, nullptr, first.worker.get()), Placer::Decision::kPlace);
  EXPECT_EQ(retry.worker->address(), b_->address());
}

TEST_F(WorkerPoolTest, ReportedWorkerIsOutUntilAPollSucceeds) {
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  std::shared_ptr<WorkerEndpoint> a = pool->Endpoints()[0];
  pool->ReportUnavailable(a.get());
  EXPECT_EQ(pool->GetStats().ready, 1);
  ASSERT_TRUE(PollUntilReady(*pool, 2));
}

TEST_F(WorkerPoolTest, DrainingWorkerIsNotUsed) {
  v1::WorkerLoad draining = Load(1000);
  draining.set_draining(true);
  a_->SetLoad(draining);
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 1));
  for (int i = 0; i < 3; ++i) {
    Placement p;
    ASSERT_EQ(Place(*pool, 4, &p), Placer::Decision::kPlace);
    EXPECT_EQ(p.worker->address(), b_->address());
  }
}

// Issue 9: a worker's state is logged when it changes, not on every poll (a draining worker
// used to log "is draining" every 200 ms until it exited).
TEST_F(WorkerPoolTest, ADrainingWorkerIsLoggedOnceNotOnEveryPoll) {
  auto stream = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*stream);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  {
    v1::WorkerLoad draining = Load(1000);
    draining.set_draining(true);
    a_->SetLoad(draining);
    auto pool = MakePool();
    ASSERT_TRUE(PollUntilReady(*pool, 1));
    for (int i = 0; i < 20; ++i) {
      pool->PollAll();
      absl::SleepFor(absl::Milliseconds(5));
    }
    a_->SetLoad(Load(1000));
    ASSERT_TRUE(PollUntilReady(*pool, 2));
  }
  spdlog::set_default_logger(previous);
  const std::string log = stream->str();
  auto count = [&](const std::string& what) {
    int n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(a_->address() + " is draining"), 1) << log;
  EXPECT_EQ(count(a_->address() + " is ready"), 1) << log;
  EXPECT_EQ(count(b_->address() + " is ready"), 1) << log;
}

// Issue 9: a worker serving another model is not used, and counted.
TEST_F(WorkerPoolTest, AWorkerOfAnotherModelIsNotUsed) {
  v1::WorkerLoad other = Load(1000);
  other.set_model_fingerprint("other");
  a_->SetLoad(other);
  v1::WorkerLoad same = Load(10);
  same.set_model_fingerprint("ours");
  same.set_max_model_len(48);
  b_->SetLoad(same);
  auto pool = MakePool();
  pool->SetModelFingerprint("ours");
  ASSERT_TRUE(PollUntilReady(*pool, 1));
  EXPECT_TRUE(WaitFor([&] {
    pool->PollAll();
    return pool->GetStats().mismatched == 1;
  }));
  EXPECT_EQ(pool->GetStats().max_model_len, 48);
  Placement p;
  ASSERT_EQ(Place(*pool, 4, &p), Placer::Decision::kPlace);
  EXPECT_EQ(p.worker->address(), b_->address());  // despite a's 1000 free blocks
}

TEST_F(WorkerPoolTest, DnsAddsNewWorkersAndDropsGoneOnes) {
  absl::Mutex mu;
  std::vector<std::string> records = {a_->address()};
  WorkerPool::Options o;
  o.dns_target = "workers.test:1234";
  o.dns_interval = absl::Milliseconds(10);
  o.resolver = [&](const std::string& host,
                   const std::string& port) -> absl::StatusOr<std::vector<std::string>> {
    EXPECT_EQ(host, "workers.test");
    EXPECT_EQ(port, "1234");
    absl::MutexLock lock(&mu);
    return records;
  };
  auto pool = MakePool(std::move(o));
  auto addresses = [&] {
    std::vector<std::string> out;
    for (const auto& w : pool->Endpoints()) out.push_back(w->address());
    return out;
  };
  ASSERT_TRUE(WaitFor([&] { return addresses() == std::vector<std::string>{a_->address()}; }));
  {
    absl::MutexLock lock(&mu);
    records = {b_->address()};
  }
  ASSERT_TRUE(WaitFor([&] { return addresses() == std::vector<std::string>{b_->address()}; }));
  ASSERT_TRUE(PollUntilReady(*pool, 1));
}

TEST_F(WorkerPoolTest, FailedLookupKeepsTheWorkers) {
  bool fail = false;
  WorkerPool::Options o;
  o.dns_target = "workers.test:1234";
  o.dns_interval = absl::Hours(1);  // only explicit ResolveNow() calls
  o.resolver = [&](const std::string&,
                   const std::string&) -> absl::StatusOr<std::vector<std::string>> {
    if (fail) return absl::UnavailableError("SERVFAIL");
    return std::vector<std::string>{a_->address()};
  };
  auto pool = MakePool(std::move(o));
  pool->ResolveNow();
  EXPECT_EQ(pool->GetStats().known, 1);
  fail = true;
  pool->ResolveNow();
  EXPECT_EQ(pool->GetStats().known, 1);
}

// The connection attempt's own deadline is not the reconnect backoff: a worker that takes longer
// to complete its handshake than the longest backoff (1 s) still becomes ready.
TEST_F(WorkerPoolTest, AWorkerSlowerToConnectThanTheBackoffBecomesReady) {
  SlowHandshakeRelay relay(a_->address(), std::chrono::milliseconds(1500));
  WorkerPool::Options o;
  o.addresses = {relay.address()};
  auto pool = MakePool(std::move(o));
  EXPECT_TRUE(WaitFor(
      [&] {
        pool->PollAll();
        return pool->GetStats().ready == 1;
      },
      absl::Seconds(10)));
}

// Cache-aware routing: a prompt goes where its prefix is cached, even to the worker with fewer
// free blocks; a prompt cached nowhere goes to the most free blocks.
TEST_F(WorkerPoolTest, APromptGoesToTheWorkerHoldingItsPrefix) {
  const std::vector<int32_t> tenant = Prompt(40, 1), other = Prompt(40, 50);
  std::vector<int32_t> question = tenant;  // the tenant's 40 tokens and a new question
  for (int i = 0; i < 9; ++i) question.push_back(7);
  a_->SetLoad(Load(900));
  b_->SetLoad(WithCached(Load(500), {tenant}));
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement p1, p2;
  ASSERT_EQ(PlacePrompt(*pool, question, &p1), Placer::Decision::kPlace);
  EXPECT_EQ(p1.worker->address(), b_->address());
  EXPECT_EQ(p1.expected_hit_tokens, 40);  // ten cached blocks
  ASSERT_EQ(PlacePrompt(*pool, other, &p2), Placer::Decision::kPlace);
  EXPECT_EQ(p2.worker->address(), a_->address());
  EXPECT_EQ(p2.expected_hit_tokens, 0);
  // The block holding the prompt's last token is computed anyway: the very same 40 tokens
  // expect 9 blocks, not 10.
  Placement p3;
  ASSERT_EQ(PlacePrompt(*pool, tenant, &p3), Placer::Decision::kPlace);
  EXPECT_EQ(p3.expected_hit_tokens, 36);
  // Another adapter's request with the same tokens cannot use the base model's blocks.
  Placement p4;
  ASSERT_EQ(PlacePrompt(*pool, question, &p4, PrefixCacheNamespace("sql")),
            Placer::Decision::kPlace);
  EXPECT_EQ(p4.worker->address(), a_->address());
  // A scoring request (prompt logprobs) computes its whole prompt wherever it goes.
  Placement p5;
  ASSERT_EQ(PlacePrompt(*pool, question, &p5, 0, /*reuses_cached_prefix=*/false),
            Placer::Decision::kPlace);
  EXPECT_EQ(p5.worker->address(), a_->address());
  EXPECT_EQ(p5.expected_hit_tokens, 0);
}

TEST_F(WorkerPoolTest, MostFreeBlocksPolicyIgnoresCaches) {
  const std::vector<int32_t> tenant = Prompt(40, 1);
  a_->SetLoad(Load(900));
  b_->SetLoad(WithCached(Load(500), {tenant}));
  WorkerPool::Options o;
  o.addresses = {a_->address(), b_->address()};
  o.policy = WorkerPool::Policy::kMostFreeBlocks;
  auto pool = MakePool(std::move(o));
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement p;
  ASSERT_EQ(PlacePrompt(*pool, tenant, &p), Placer::Decision::kPlace);
  EXPECT_EQ(p.worker->address(), a_->address());
  EXPECT_EQ(p.expected_hit_tokens, 0);
}

// A burst of one tenant's requests arrives before any poll can show its blocks cached: the
// second follows the first (which will have computed them), not the most free blocks.
TEST_F(WorkerPoolTest, PlacedPromptsCountAsCachedUntilAPollCanShowThem) {
  const std::vector<int32_t> tenant = Prompt(40, 1), other = Prompt(40, 50);
  a_->SetLoad(Load(500));
  b_->SetLoad(Load(495));
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement p1, p2, p3;
  ASSERT_EQ(PlacePrompt(*pool, tenant, &p1), Placer::Decision::kPlace);
  ASSERT_EQ(p1.worker->address(), a_->address());  // 11 blocks reserved: a has 489 free, b 495
  ASSERT_EQ(PlacePrompt(*pool, tenant, &p2), Placer::Decision::kPlace);
  EXPECT_EQ(p2.worker->address(), a_->address());
  EXPECT_EQ(p2.expected_hit_tokens, 36);
  ASSERT_EQ(PlacePrompt(*pool, other, &p3), Placer::Decision::kPlace);
  EXPECT_EQ(p3.worker->address(), b_->address());
  // Released and polled, a placement's hashes are forgotten: the worker's filter (here empty:
  // the fake worker caches nothing) is the truth again.
  pool->Release(p1);
  pool->Release(p2);
  ASSERT_TRUE(PollsAfterNow(*pool, *a_));
  Placement p4;
  ASSERT_EQ(PlacePrompt(*pool, tenant, &p4), Placer::Decision::kPlace);
  EXPECT_EQ(p4.expected_hit_tokens, 0);
}

// The worker holding the prefix may have a short queue of its own while another has room; with
// no room anywhere the request waits in the router, cached prefix or not.
TEST_F(WorkerPoolTest, TheWorkerHoldingThePrefixMayHaveAQueueWhileAnotherHasRoom) {
  const std::vector<int32_t> tenant = Prompt(40, 1);
  v1::WorkerLoad queued = WithCached(Load(900), {tenant});
  queued.set_running(3);
  queued.set_waiting(2);
  a_->SetLoad(queued);
  b_->SetLoad(Load(500));
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement p1, p2;
  ASSERT_EQ(PlacePrompt(*pool, tenant, &p1), Placer::Decision::kPlace);
  EXPECT_EQ(p1.worker->address(), a_->address());
  EXPECT_EQ(p1.expected_hit_tokens, 36);
  ASSERT_EQ(PlacePrompt(*pool, Prompt(40, 50), &p2), Placer::Decision::kPlace);
  EXPECT_EQ(p2.worker->address(), b_->address());  // nothing cached: the worker with room
  v1::WorkerLoad b_queued = Load(500);
  b_queued.set_waiting(1);
  b_->SetLoad(b_queued);
  ASSERT_TRUE(PollsAfterNow(*pool, *b_));
  Placement p3;
  EXPECT_EQ(PlacePrompt(*pool, tenant, &p3), Placer::Decision::kWait);
}

// Affinity gives way when the worker holding the prefix is much busier than another.
TEST_F(WorkerPoolTest, LopsidedLoadOutweighsACachedPrefix) {
  const std::vector<int32_t> tenant = Prompt(40, 1);
  v1::WorkerLoad busy = WithCached(Load(900), {tenant});
  busy.set_running(20);
  v1::WorkerLoad idle = Load(500);
  idle.set_running(2);
  a_->SetLoad(busy);
  b_->SetLoad(idle);
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  Placement p1;
  ASSERT_EQ(PlacePrompt(*pool, tenant, &p1), Placer::Decision::kPlace);
  // 20 - 2 > 8 and 20 > 1.5 * 2: the least loaded, although a has more free blocks.
  EXPECT_EQ(p1.worker->address(), b_->address());
  EXPECT_EQ(p1.expected_hit_tokens, 0);
  busy.set_running(10);  // 10 - (2 + p1 placed there) = 7: not lopsided
  a_->SetLoad(busy);
  ASSERT_TRUE(PollsAfterNow(*pool, *a_));
  Placement p2;
  ASSERT_EQ(PlacePrompt(*pool, tenant, &p2), Placer::Decision::kPlace);
  EXPECT_EQ(p2.worker->address(), a_->address());
  EXPECT_EQ(p2.expected_hit_tokens, 36);
}

// The filter travels only when it changed; a malformed one is ignored, not trusted.
TEST_F(WorkerPoolTest, AWorkersFilterIsFetchedOnlyWhenItChanged) {
  const std::vector<int32_t> tenant = Prompt(40, 1);
  a_->SetLoad(Load(900));
  b_->SetLoad(WithCached(Load(500), {tenant}, /*version=*/41));
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  const int calls = b_->get_load_calls();
  ASSERT_TRUE(WaitFor([&] {
    pool->PollAll();
    return b_->get_load_calls() >= calls + 3;
  }));
  EXPECT_EQ(b_->prefix_filters_sent(), 1);
  Placement p;
  ASSERT_EQ(PlacePrompt(*pool, tenant, &p), Placer::Decision::kPlace);
  EXPECT_EQ(p.worker->address(), b_->address());  // the held copy still counts
  pool->Release(p);
  v1::WorkerLoad garbled = Load(500);
  garbled.set_prefix_filter(std::string(12, '\xff'));  // not a power of two
  garbled.set_prefix_filter_version(42);
  garbled.set_prefix_filter_hashes(6);
  b_->SetLoad(garbled);
  ASSERT_TRUE(PollsAfterNow(*pool, *b_));
  EXPECT_GE(b_->prefix_filters_sent(), 2);
  Placement q;
  ASSERT_EQ(PlacePrompt(*pool, tenant, &q), Placer::Decision::kPlace);
  EXPECT_EQ(q.worker->address(), a_->address());
  EXPECT_EQ(pool->GetStats().ready, 2);  // still used, just not for its cache
}

TEST_F(WorkerPoolTest, AnAdaptersRequestsGoOnlyToWorkersServingIt) {
  v1::ModelInfo with_sql = FakeWorker::DefaultInfo();
  with_sql.add_lora_adapters("sql");  // a worker's polls list the adapters it serves
  a_->SetInfo(with_sql);
  a_->SetLoad(Load(100));
  b_->SetLoad(Load(500));  // more room, but no adapter
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  EXPECT_THAT(pool->ServedAdapters(), ElementsAre("sql"));
  AdmissionTicket t;
  t.prompt_tokens = 8;
  t.lora_adapter = "sql";
  Placement p;
  absl::Status error;
  ASSERT_EQ(pool->Place(t, &p, &error), Placer::Decision::kPlace);
  EXPECT_EQ(p.worker->address(), a_->address());
  pool->Release(p);
  t.lora_adapter = "chat";
  EXPECT_EQ(pool->Place(t, &p, &error), Placer::Decision::kReject);
  EXPECT_EQ(error.code(), absl::StatusCode::kNotFound) << error;
  t.lora_adapter = "";  // the base model: anywhere (the most free blocks)
  ASSERT_EQ(pool->Place(t, &p, &error), Placer::Decision::kPlace);
  EXPECT_EQ(p.worker->address(), b_->address());
}

TEST_F(WorkerPoolTest, AnAdapterChangeTheRouterMadeCountsAtOnceAndPollsKeepIt) {
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  AdmissionTicket t;
  t.prompt_tokens = 8;
  t.lora_adapter = "sql";
  Placement p;
  absl::Status error;
  EXPECT_EQ(pool->Place(t, &p, &error), Placer::Decision::kReject);
  // b answered a load: it serves "sql" from now on, before any poll says so ...
  std::shared_ptr<WorkerEndpoint> b;
  for (const auto& w : pool->Endpoints()) {
    if (w->address() == b_->address()) b = w;
  }
  ASSERT_NE(b, nullptr);
  const int changes = changes_.load();
  pool->SetAdapters(b.get(), {"sql"});
  EXPECT_GT(changes_.load(), changes);  // the queue is woken
  ASSERT_EQ(pool->Place(t, &p, &error), Placer::Decision::kPlace);
  EXPECT_EQ(p.worker->address(), b_->address());
  pool->Release(p);
  // ... and polls answered later (the fake lists none: a poll of the old state) do not undo it
  // until one sent after the change says otherwise.
  EXPECT_THAT(pool->ServedAdapters(), ElementsAre("sql"));
  ASSERT_TRUE(PollsAfterNow(*pool, *b_));
  EXPECT_TRUE(pool->ServedAdapters().empty());
}

TEST_F(WorkerPoolTest, AWorkerThatBecomesReadyIsDueWhatEveryOtherLoadedAtRunTime) {
  // a and b loaded "sql" at run time (from the same path); c joins later, serving none.
  const v1::ModelInfo with_sql = BothLoadedSql(0);
  auto c = FakeWorker::Start({});
  c->SetLoad(Load(100));
  c->SetGetLoadFails(true);
  WorkerPool::Options o;
  o.addresses = {a_->address(), b_->address(), c->address()};
  o.replay_runtime_adapters = true;
  auto pool = MakePool(std::move(o));
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  EXPECT_TRUE(pool->TakeAdapterReplays().empty());  // a and b serve the same
  c->SetGetLoadFails(false);
  ASSERT_TRUE(PollUntilReady(*pool, 3));
  std::vector<WorkerPool::AdapterReplay> replays = pool->TakeAdapterReplays();
  ASSERT_EQ(replays.size(), 1u);
  EXPECT_EQ(replays[0].worker->address(), c->address());
  ASSERT_EQ(replays[0].adapters.size(), 1u);
  EXPECT_EQ(replays[0].adapters[0].lora_name(), "sql");
  EXPECT_EQ(replays[0].adapters[0].lora_path(), "adapters/sql");
  EXPECT_TRUE(pool->TakeAdapterReplays().empty());  // taken once

  // Down and back, now serving it (its load answered): nothing is due.
  c->SetInfo(with_sql);
  c->SetGetLoadFails(true);
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  c->SetGetLoadFails(false);
  ASSERT_TRUE(PollUntilReady(*pool, 3));
  EXPECT_TRUE(pool->TakeAdapterReplays().empty());

  // An adapter only some workers loaded (b's load failed, say) is not due on a new one.
  b_->SetLoad(Load(100));
  ASSERT_TRUE(PollsAfterNow(*pool, *b_));
  c->SetInfo(FakeWorker::DefaultInfo());
  c->SetGetLoadFails(true);
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  c->SetGetLoadFails(false);
  ASSERT_TRUE(PollUntilReady(*pool, 3));
  EXPECT_TRUE(pool->TakeAdapterReplays().empty());
}

TEST_F(WorkerPoolTest, AWorkerRestartedBetweenTwoPollsIsDueThemToo) {
  BothLoadedSql(/*start_id=*/1);
  WorkerPool::Options o;
  o.addresses = {a_->address(), b_->address()};
  o.replay_runtime_adapters = true;
  auto pool = MakePool(std::move(o));
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  EXPECT_TRUE(pool->TakeAdapterReplays().empty());
  // b is a new process at the same address before any poll failed: it lost the adapter.
  v1::WorkerLoad fresh = Load(100);
  fresh.set_start_id(2);
  b_->SetInfo(FakeWorker::DefaultInfo());
  b_->SetLoad(fresh);
  ASSERT_TRUE(PollsAfterNow(*pool, *b_));
  std::vector<WorkerPool::AdapterReplay> replays = pool->TakeAdapterReplays();
  ASSERT_EQ(replays.size(), 1u);
  EXPECT_EQ(replays[0].worker->address(), b_->address());
  ASSERT_EQ(replays[0].adapters.size(), 1u);
  EXPECT_EQ(replays[0].adapters[0].lora_name(), "sql");
}

TEST_F(WorkerPoolTest, NoReplaysWithoutRuntimeLoraUpdating) {
  v1::WorkerLoad loaded = Load(100);
  loaded.add_runtime_lora_adapters()->set_lora_name("sql");
  a_->SetLoad(loaded);
  b_->SetGetLoadFails(true);
  auto pool = MakePool();
  ASSERT_TRUE(PollUntilReady(*pool, 1));
  b_->SetGetLoadFails(false);
  ASSERT_TRUE(PollUntilReady(*pool, 2));
  EXPECT_TRUE(pool->TakeAdapterReplays().empty());
}

TEST(ResolveHostTest, ResolvesLocalhost) {
  auto found = ResolveHost("localhost", "50052");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, Contains("127.0.0.1:50052"));
}

}  // namespace
}  // namespace pagellm
