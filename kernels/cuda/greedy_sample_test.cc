// Greedy sampling on the GPU against a host reference on fresh random rows: ties to the lower id,
// suppressed ids, logprobs (log_softmax in double), rank, top-N order, and the error statuses.
#include "kernels/cuda/greedy_sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/testing/cuda_test_util.h"

namespace pagellm::kernels::cuda {
namespace {

using testing::DeviceArray;

TEST(GreedySampleTest, MatchesTheHostReference) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const int64_t vocab = 128256;
  std::mt19937 rng(9);
  std::vector<float> logits = testing::RandomValues(6 * vocab, rng, 3.0f);
  // Row 1: a tie at the maximum (ids 7 and 100000). Row 2: its argmax suppressed. Row 3: every
  // logit -inf but the suppressed ones. Row 4: a NaN. Row 5: coarse values (many ties), top-20.
  for (int64_t i : {7, 100000}) logits[1 * vocab + i] = 50.0f;
  const int32_t argmax2 = static_cast<int32_t>(
      std::max_element(logits.begin() + 2 * vocab, logits.begin() + 3 * vocab) -
      (logits.begin() + 2 * vocab));
  std::fill(logits.begin() + 3 * vocab, logits.begin() + 4 * vocab, -INFINITY);
  logits[3 * vocab + 5] = 1.0f;
  logits[4 * vocab + 321] = NAN;
  for (int64_t i = 0; i < vocab; ++i) logits[5 * vocab + i] = std::round(logits[5 * vocab + i]);
  const std::vector<int32_t> suppress = {argmax2, 5};
  std::vector<GreedyRow> rows(6);
  for (int i = 0; i < 6; ++i) rows[i].logits_row = i;
  rows[0].num_logprobs = 5;
  rows[1].num_logprobs = 0;
  rows[2] = {2, 0, 1, 3};
  rows[3] = {3, 1, 1, -1};
  rows[5].num_logprobs = 20;
  DeviceArray<float> d_logits(logits);
  DeviceArray<int32_t> d_sup(suppress);
  testing::DeviceArray<uint8_t> d_rows(sizeof(GreedyRow) * rows.size());
  ASSERT_EQ(cudaMemcpy(d_rows.get(), rows.data(), sizeof(GreedyRow) * rows.size(),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  testing::DeviceArray<uint8_t> d_out(sizeof(GreedyResult) * rows.size());
  d_out.Poison();
  ASSERT_CUDA_OK(
      LaunchGreedySample(d_logits.get(), vocab, reinterpret_cast<const GreedyRow*>(d_rows.get()), 6,
                         d_sup.get(), reinterpret_cast<GreedyResult*>(d_out.get()), nullptr));
  std::vector<GreedyResult> got(rows.size());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), d_out.get(), sizeof(GreedyResult) * got.size(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);

  for (int r : {0, 1, 2, 5}) {
    const float* x = logits.data() + r * vocab;
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [x](int32_t a, int32_t b) { return x[a] > x[b]; });
    int32_t want = order[0];
    if (r == 2) want = order[1];  // the argmax is suppressed
    double max = x[order[0]], sum = 0.0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(x[i]) - max);
    const double log_z = max + std::log(sum);
    ASSERT_EQ(got[r].status, GreedyResult::kOk) << r;
    EXPECT_EQ(got[r].token, want) << r;
    if (rows[r].num_logprobs < 0) continue;
    EXPECT_NEAR(got[r].logprob, x[want] - log_z, 1e-4) << r;
    int32_t rank = 1;
    for (int64_t i = 0; i < vocab; ++i) rank += x[i] > x[want];
    EXPECT_EQ(got[r].rank, rank) << r;
    ASSERT_EQ(got[r].num_top, rows[r].num_logprobs) << r;
    for (int k = 0; k < got[r].num_top; ++k) {
      EXPECT_EQ(got[r].top_ids[k], order[k]) << r << " top " << k;
      EXPECT_NEAR(got[r].top_logprobs[k], x[order[k]] - log_z, 1e-4);
    }
  }
  EXPECT_EQ(got[1].token, 7);  // ties: the lower id
  EXPECT_EQ(got[3].status, GreedyResult::kNoFiniteLogit);
  EXPECT_EQ(got[4].status, GreedyResult::kNanOrInf);
}

}  // namespace
}  // namespace pagellm::kernels::cuda
