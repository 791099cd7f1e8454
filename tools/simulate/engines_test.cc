// Every policy finishes every request and hands back every KV slot, under light load and under
// memory pressure (preemption, swapping, fragmentation).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/simulate/orca_simulator.h"
#include "tools/simulate/simulation.h"

namespace pagellm::sim {
namespace {

constexpr Policy kAll[] = {Policy::kPagellm, Policy::kOrcaMax, Policy::kOrcaPow2,
                           Policy::kOrcaOracle};

// OPT-13B on an A100-40GB with a pool of `blocks` blocks of 16 tokens.
SimConfig Config(int64_t blocks, const std::string& preemption = "auto") {
  SimulationSetup s;
  s.num_kv_blocks = blocks;
  s.preemption_mode = preemption;
  auto c = BuildConfig(s);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

std::vector<TraceRequest> Trace(const std::string& name, int64_t n, double rate) {
  TraceOptions o;
  o.num_requests = n;
  o.request_rate = rate;
  o.seed = 5;
  o.max_len = 2048;
  auto t = MakeTrace(name, o);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

void ExpectSane(const PolicyResult& r, int64_t n) {
  EXPECT_EQ(r.completed, n);
  EXPECT_GT(r.steps, 0);
  EXPECT_GT(r.mean_batched, 0);
  EXPECT_NEAR(r.memory.total(), 1.0, 1e-9);
  EXPECT_GE(r.memory.live, 0);
  EXPECT_GE(r.memory.reserved, 0);
  EXPECT_GE(r.memory.internal, 0);
  EXPECT_GE(r.memory.external, 0);
  EXPECT_GT(r.throughput_rps, 0);
  EXPECT_GT(r.mean_norm_latency_s, 0);
}

TEST(EnginesTest, EveryPolicyFinishesEveryRequestUnderPressure) {
  // 160 blocks = 2560 slots: one Orca-Max reservation at a time; paged must preempt.
  const SimConfig c = Config(160);
  const auto trace = Trace("sharegpt", 60, 20);
  for (Policy p : kAll) {
    SCOPED_TRACE(PolicyName(p));
    auto r = RunPolicy(p, c, trace, 20);  // Internal if any block or slot leaked
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectSane(*r, 60);
    if (p == Policy::kPagellm) {
      EXPECT_GT(r->preemptions, 0);
      EXPECT_EQ(r->memory.external, 0);
    } else {
      EXPECT_EQ(r->preemptions, 0);
    }
    if (p == Policy::kOrcaMax) {
      EXPECT_LE(r->mean_batched, 1.0);
    }
  }
}

TEST(EnginesTest, SwapPreemptionMovesBlocksAndFreesBothPools) {
  const SimConfig c = Config(160, "swap");
  ASSERT_GT(c.num_swap_blocks, 0);
  auto r = RunPolicy(Policy::kPagellm, c, Trace("sharegpt", 60, 20), 20);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSane(*r, 60);
  EXPECT_GT(r->preemptions, 0);
  EXPECT_GT(r->swapped_blocks, 0);
}

TEST(EnginesTest, LightLoadRunsEveryRequestAlone) {
  // Requests far apart: each runs alone, so every policy sees the same steps and latencies.
  const SimConfig c = Config(0);
  auto trace = Trace("alpaca", 20, 1);
  for (size_t i = 0; i < trace.size(); ++i) trace[i].arrival_s = 100.0 * static_cast<double>(i);
  std::vector<double> latency;
  for (Policy p : kAll) {
    SCOPED_TRACE(PolicyName(p));
    auto r = RunPolicy(p, c, trace, 0.01);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectSane(*r, 20);
    EXPECT_DOUBLE_EQ(r->mean_batched, 1.0);
    latency.push_back(r->mean_norm_latency_s);
  }
  for (double l : latency) EXPECT_NEAR(l, latency[0], 1e-9);
}

TEST(EnginesTest, OracleWastesOneSlotPerRequestAndMaxWastesTheRest) {
  const SimConfig c = Config(0);
  const auto trace = Trace("alpaca", 200, 5);
  auto oracle = RunPolicy(Policy::kOrcaOracle, c, trace, 5);
  auto max = RunPolicy(Policy::kOrcaMax, c, trace, 5);
  ASSERT_TRUE(oracle.ok() && max.ok());
  EXPECT_LT(oracle->memory.internal, 0.01);
  EXPECT_GT(max->memory.internal, oracle->memory.internal);
}

TEST(EnginesTest, ReservationSizes) {
  const TraceRequest r{.arrival_s = 0, .input_len = 100, .output_len = 200};
  EXPECT_EQ(ReservationSize(Reservation::kMax, r, 2048), 2048);
  EXPECT_EQ(ReservationSize(Reservation::kPow2, r, 2048), 512);
  EXPECT_EQ(ReservationSize(Reservation::kOracle, r, 2048), 300);
  const TraceRequest full{.arrival_s = 0, .input_len = 1000, .output_len = 1048};
  EXPECT_EQ(ReservationSize(Reservation::kPow2, full, 2048), 2048);
}

TEST(EnginesTest, AReservationLargerThanThePoolIsRejected) {
  auto r = RunPolicy(Policy::kOrcaMax, Config(100), Trace("alpaca", 5, 1), 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EnginesTest, PolicyNamesRoundTrip) {
  auto all = ParsePolicies("pagellm, ORCA-MAX,orca-pow2,orca-oracle");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ((*all)[i], kAll[i]);
  EXPECT_FALSE(ParsePolicies("fastgen").ok());
  EXPECT_FALSE(ParsePolicies("").ok());
}

}  // namespace
}  // namespace pagellm::sim
