// The acceptance check of the simulator: the vLLM paper's Fig. 12 / Fig. 2 comparison on its own
// setup (OPT-13B, one A100-40GB, ShareGPT-like requests at 2 req/s). The paper batches 7.00
// (Orca-Max) < 9.81 (Pow2) < 13.62 (Oracle) < 30.42 (vLLM) requests, and vLLM's KV memory holds
// 96.3% token states against 20-40% for Orca. We check the ordering, the 2x margin over Orca-Max
// and the memory shares, not the exact numbers (see simulate_main.cc for why they differ).
#include <map>

#include "gtest/gtest.h"
#include "tools/simulate/simulation.h"

namespace pagellm::sim {
namespace {

std::map<Policy, PolicyResult> RunPaperScenario(int64_t num_requests) {
  auto config = BuildConfig(SimulationSetup{});  // defaults: OPT-13B, A100-40GB
  EXPECT_TRUE(config.ok()) << config.status();
  TraceOptions o;
  o.num_requests = num_requests;
  o.request_rate = 2;
  o.seed = 0;
  o.max_len = config->model.max_len;
  auto trace = MakeTrace("sharegpt", o);
  EXPECT_TRUE(trace.ok()) << trace.status();
  std::map<Policy, PolicyResult> results;
  for (Policy p : {Policy::kPagellm, Policy::kOrcaMax, Policy::kOrcaPow2, Policy::kOrcaOracle}) {
    auto r = RunPolicy(p, *config, *trace, 2);
    EXPECT_TRUE(r.ok()) << PolicyName(p) << ": " << r.status();
    if (r.ok()) results[p] = *r;
  }
  return results;
}

TEST(PaperOrderingTest, PagedBatchesMoreRequestsThanEveryOrcaVariant) {
  auto r = RunPaperScenario(1000);  // about 0.1 s
  ASSERT_EQ(r.size(), 4);
  const double max = r[Policy::kOrcaMax].mean_batched;
  const double pow2 = r[Policy::kOrcaPow2].mean_batched;
  const double oracle = r[Policy::kOrcaOracle].mean_batched;
  const double paged = r[Policy::kPagellm].mean_batched;
  RecordProperty("batched", testing::PrintToString(std::vector{max, pow2, oracle, paged}));
  EXPECT_LT(max, pow2);
  EXPECT_LT(pow2, oracle);
  EXPECT_LT(oracle, paged);
  EXPECT_GE(paged, 2 * max);
  // Orca-Max fits pool / 2048 requests: about 7 on this pool, as in the paper.
  EXPECT_NEAR(max, 7.0, 0.5);

  // Fig. 2: paged memory is nearly all tokens; contiguous reservation wastes most of it.
  EXPECT_GT(r[Policy::kPagellm].live_share_of_used, 0.9);
  // Orca's share grows with the precision of its reservation (paper: 20.4% to 38.2%). Time-
  // weighted, an exact reservation is at least half live over a request's life, so Oracle's
  // share stays above 50% of live + reserved; only external fragmentation pulls it lower.
  EXPECT_LT(r[Policy::kOrcaMax].live_share_of_used, 0.4);
  EXPECT_LT(r[Policy::kOrcaMax].live_share_of_used, r[Policy::kOrcaPow2].live_share_of_used);
  EXPECT_LT(r[Policy::kOrcaPow2].live_share_of_used, r[Policy::kOrcaOracle].live_share_of_used);
  EXPECT_LT(r[Policy::kOrcaOracle].live_share_of_used, 0.6);
  // ... and queueing behind the reservations shows in the latency.
  EXPECT_LT(r[Policy::kPagellm].mean_norm_latency_s, r[Policy::kOrcaOracle].mean_norm_latency_s);
}

}  // namespace
}  // namespace pagellm::sim
