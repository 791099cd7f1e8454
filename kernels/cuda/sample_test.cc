// Sampling on the GPU against a float64 host reference of sampler.h's semantics, on fresh random
// rows: the penalized row bit for bit, greedy over it, and for sweeps of temperature, top-k,
// top-p and min-p (ties included) the drawn token for many u -- equal to the reference's, or,
// where rounding can move the answer, at a cumulative boundary within 1e-6 of u * total.
#include "kernels/cuda/sample.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/testing/cuda_test_util.h"

namespace pagellm::kernels::cuda {
namespace {

using testing::DeviceArray;

template <typename T>
std::unique_ptr<DeviceArray<uint8_t>> UploadStructs(const std::vector<T>& v) {
  auto d = std::make_unique<DeviceArray<uint8_t>>(sizeof(T) * std::max<size_t>(v.size(), 1));
  EXPECT_EQ(cudaMemcpy(d->get(), v.data(), sizeof(T) * v.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  return d;
}

std::vector<GreedyResult> RunSample(const std::vector<float>& logits, const float* work,
                                    int64_t vocab, const std::vector<SampleRow>& rows) {
  DeviceArray<float> d_logits(logits);
  const auto d_rows = UploadStructs(rows);
  DeviceArray<uint8_t> d_out(sizeof(GreedyResult) * rows.size());
  d_out.Poison();
  EXPECT_EQ(
      LaunchSample(d_logits.get(), work, vocab, reinterpret_cast<const SampleRow*>(d_rows->get()),
                   rows.size(), reinterpret_cast<GreedyResult*>(d_out.get()), nullptr),
      cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<GreedyResult> got(rows.size());
  EXPECT_EQ(cudaMemcpy(got.data(), d_out.get(), sizeof(GreedyResult) * got.size(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  return got;
}

// The survivors of sampler.h's truncation in id order, with their p = exp((x - max) / T).
struct Kept {
  std::vector<int32_t> ids;
  std::vector<double> p;
  double total = 0.0;
};

Kept Reference(const float* x, int64_t vocab, const SampleRow& row) {
  const double max = *std::max_element(x, x + vocab);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [x](int32_t a, int32_t b) { return x[a] > x[b]; });
  std::vector<double> p(vocab);
  for (int64_t i = 0; i < vocab; ++i) p[i] = std::exp((x[i] - max) / row.temperature);
  if (row.top_k > 0 && row.top_k < vocab) order.resize(row.top_k);
  if (row.top_p < 1.0f) {
    double total = 0.0, above = 0.0;
    for (int32_t id : order) total += p[id];
    size_t kept = 0;
    while (kept < order.size() && above < row.top_p * total) above += p[order[kept++]];
    order.resize(kept);
  }
  Kept k;
  for (int32_t id : order) {
    if (p[id] > 0.0 && p[id] >= row.min_p) k.ids.push_back(id);
  }
  std::sort(k.ids.begin(), k.ids.end());
  for (int32_t id : k.ids) {
    k.p.push_back(p[id]);
    k.total += p[id];
  }
  return k;
}

TEST(SampleTest, TruncatedDrawsMatchTheReference) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const int64_t vocab = 151936;
  std::mt19937 rng(11);
  struct Config {
    const char* name;
    float quantum;  // > 0: logits rounded to multiples of it (ties at every threshold)
    SampleRow row;
  };
  const Config configs[] = {
      {"temperature", 0, {.temperature = 1.0f}},
      {"cold", 0, {.temperature = 0.3f}},
      {"top-k 50", 0, {.temperature = 0.8f, .top_k = 50}},
      {"top-k ties", 0.5f, {.temperature = 1.0f, .top_k = 700}},
      {"top-p 0.9", 0, {.temperature = 1.0f, .top_p = 0.9f}},
      {"top-p flat", 0, {.temperature = 3.0f, .top_p = 0.5f}},
      {"top-p ties", 0.25f, {.temperature = 1.0f, .top_p = 0.6f}},
      {"min-p", 0, {.temperature = 0.7f, .min_p = 0.1f}},
      {"all three", 0, {.temperature = 1.0f, .top_k = 2000, .top_p = 0.8f, .min_p = 0.01f}},
  };
  constexpr int kDraws = 48;
  int boundary_cases = 0, total_cases = 0;
  for (const Config& c : configs) {
    SCOPED_TRACE(c.name);
    std::vector<float> logits = testing::RandomValues(2 * vocab, rng, 3.0f);
    for (int i = 0; i < 20; ++i) logits[(i * 7919) % vocab] += 9.0f;
    if (c.quantum > 0) {
      for (float& l : logits) l = std::round(l / c.quantum) * c.quantum;
    }
    std::vector<SampleRow> rows;
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (int d = 0; d < kDraws; ++d) {
      SampleRow r = c.row;
      r.logits_row = d % 2;
      r.u = uniform(rng);
      rows.push_back(r);
    }
    const std::vector<GreedyResult> got = RunSample(logits, nullptr, vocab, rows);
    const Kept kept[2] = {Reference(logits.data(), vocab, c.row),
                          Reference(logits.data() + vocab, vocab, c.row)};
    for (int d = 0; d < kDraws; ++d) {
      ASSERT_EQ(got[d].status, GreedyResult::kOk) << d;
      const Kept& k = kept[d % 2];
      const double r = rows[d].u * k.total;
      size_t j = 0;
      double before = 0.0;
      while (j + 1 < k.ids.size() && before + k.p[j] <= r) before += k.p[j++];
      ++total_cases;
      if (got[d].token == k.ids[j]) continue;
      // Otherwise the GPU's token must be a survivor next to the reference's, with u * total
      // within rounding of the boundary between them.
      const auto it = std::lower_bound(k.ids.begin(), k.ids.end(), got[d].token);
      ASSERT_TRUE(it != k.ids.end() && *it == got[d].token) << "not a survivor: " << got[d].token;
      const size_t g = it - k.ids.begin();
      ASSERT_TRUE(g + 1 == j || g == j + 1) << d;
      const double boundary = g < j ? before : before + k.p[j];
      EXPECT_LT(std::abs(boundary - r), 1e-6 * k.total) << d;
      ++boundary_cases;
    }
  }
  EXPECT_LE(boundary_cases, total_cases / 100);
}

TEST(SampleTest, PenaltiesSuppressionAndGreedyOverThePenalizedRow) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const int64_t vocab = 128256;
  std::mt19937 rng(12);
  std::vector<float> logits = testing::RandomValues(2 * vocab, rng, 3.0f);
  const int32_t argmax1 = static_cast<int32_t>(
      std::max_element(logits.begin() + vocab, logits.end()) - (logits.begin() + vocab));
  // Row 0 (work 1): every penalty over 300 history ids; row 1 (work 0): its argmax suppressed.
  std::vector<PenaltyEntry> history;
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<uint8_t> seen(vocab, 0);
  while (history.size() < 300) {
    const int32_t t = id(rng);
    if (seen[t]) continue;
    seen[t] = 1;
    history.push_back({t, static_cast<int32_t>(history.size() % 4)});
  }
  const std::vector<int32_t> suppress = {argmax1, 3};
  const std::vector<PenaltyRow> prow = {
      {.logits_row = 0,
       .work_row = 1,
       .history_begin = 0,
       .history_count = 300,
       .repetition = 1.3f,
       .frequency = 0.5f,
       .presence = 0.25f},
      {.logits_row = 1, .work_row = 0, .suppress_begin = 0, .suppress_count = 2}};
  DeviceArray<float> d_logits(logits);
  const auto d_prow = UploadStructs(prow);
  const auto d_hist = UploadStructs(history);
  DeviceArray<int32_t> d_sup(suppress);
  DeviceArray<float> d_work(2 * vocab);
  d_work.Poison();
  ASSERT_CUDA_OK(LaunchApplyPenalties(
      d_logits.get(), vocab, reinterpret_cast<const PenaltyRow*>(d_prow->get()), 2,
      reinterpret_cast<const PenaltyEntry*>(d_hist->get()), d_sup.get(), d_work.get(), nullptr));
  const std::vector<float> work = d_work.Download();

  std::vector<float> want(logits.begin(), logits.begin() + vocab);
  for (const PenaltyEntry& e : history) {
    float v = want[e.id];
    v = v > 0.0f ? v / 1.3f : v * 1.3f;
    v -= 0.5f * static_cast<float>(e.output_count);
    if (e.output_count > 0) v -= 0.25f;
    want[e.id] = v;
  }
  for (int64_t i = 0; i < vocab; ++i) ASSERT_EQ(work[vocab + i], want[i]) << i;
  for (int64_t i = 0; i < vocab; ++i) {
    const float w = i == argmax1 || i == 3 ? -INFINITY : logits[vocab + i];
    ASSERT_EQ(work[i], w) << i;
  }

  const std::vector<SampleRow> rows = {{.logits_row = 0, .work_row = 1, .num_logprobs = 3},
                                       {.logits_row = 1, .work_row = 0}};
  const std::vector<GreedyResult> got = RunSample(logits, d_work.get(), vocab, rows);
  ASSERT_EQ(got[0].status, GreedyResult::kOk);
  ASSERT_EQ(got[1].status, GreedyResult::kOk);
  EXPECT_EQ(got[0].token, std::max_element(want.begin(), want.end()) - want.begin());
  EXPECT_EQ(got[1].token, std::max_element(work.begin(), work.begin() + vocab) - work.begin());
  EXPECT_NE(got[1].token, argmax1);
  // Logprobs are of the raw row: rank 1 + the raw logits above the chosen one.
  int32_t rank = 1;
  for (int64_t i = 0; i < vocab; ++i) rank += logits[i] > logits[got[0].token];
  EXPECT_EQ(got[0].rank, rank);
  EXPECT_EQ(got[0].num_top, 3);
  EXPECT_EQ(got[0].top_ids[0],
            std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin());
}

TEST(SampleTest, BeamCandidatesAreTheBestAllowedIdsWithDoubleLogprobs) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const int64_t vocab = 128256;
  std::mt19937 rng(14);
  std::vector<float> logits = testing::RandomValues(2 * vocab, rng, 3.0f);
  for (int64_t i = vocab; i < 2 * vocab; ++i) logits[i] = std::round(logits[i]);  // many ties
  std::vector<int32_t> order[2];
  for (int r = 0; r < 2; ++r) {
    const float* x = logits.data() + r * vocab;
    order[r].resize(vocab);
    std::iota(order[r].begin(), order[r].end(), 0);
    std::stable_sort(order[r].begin(), order[r].end(),
                     [x](int32_t a, int32_t b) { return x[a] > x[b]; });
  }
  const std::vector<int32_t> suppress = {order[0][0], order[0][3]};
  const std::vector<BeamRow> rows = {{0, 0, 2, 8, 0}, {1, 0, 0, 512, 8}, {0, 0, 0, 1, 520}};
  const auto d_rows = UploadStructs(rows);
  DeviceArray<float> d_logits(logits);
  DeviceArray<int32_t> d_sup(suppress);
  DeviceArray<int32_t> d_ids(521);
  DeviceArray<double> d_lp(521);
  d_ids.Poison();
  d_lp.Poison();
  ASSERT_CUDA_OK(LaunchBeamCandidates(d_logits.get(), vocab,
                                      reinterpret_cast<const BeamRow*>(d_rows->get()), 3,
                                      d_sup.get(), d_ids.get(), d_lp.get(), nullptr));
  const std::vector<int32_t> ids = d_ids.Download();
  const std::vector<double> lp = d_lp.Download();
  for (size_t r = 0; r < rows.size(); ++r) {
    const BeamRow& b = rows[r];
    const float* x = logits.data() + b.logits_row * vocab;
    double max = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < vocab; ++i) max = std::max(max, static_cast<double>(x[i]));
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(x[i]) - max);
    const double log_z = max + std::log(sum);
    std::vector<int32_t> want;
    for (int32_t id : order[b.logits_row]) {
      const bool banned = std::find(suppress.begin() + b.suppress_begin,
                                    suppress.begin() + b.suppress_begin + b.suppress_count,
                                    id) != suppress.begin() + b.suppress_begin + b.suppress_count;
      if (!banned) want.push_back(id);
      if (static_cast<int>(want.size()) == b.num_candidates) break;
    }
    for (int k = 0; k < b.num_candidates; ++k) {
      ASSERT_EQ(ids[b.out_begin + k], want[k]) << r << " candidate " << k;
      EXPECT_NEAR(lp[b.out_begin + k], x[want[k]] - log_z, 1e-9) << r << " candidate " << k;
    }
  }
}

TEST(SampleTest, ErrorsAndBatchInvariance) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const int64_t vocab = 50000;
  std::mt19937 rng(13);
  std::vector<float> logits = testing::RandomValues(3 * vocab, rng, 2.0f);
  logits[1 * vocab + 77] = NAN;
  std::fill(logits.begin() + 2 * vocab, logits.end(), -INFINITY);
  const SampleRow seeded{.logits_row = 0, .temperature = 1.0f, .top_p = 0.9f, .u = 0.6180339};
  std::vector<SampleRow> rows = {seeded};
  const int32_t alone = RunSample(logits, nullptr, vocab, rows)[0].token;
  rows = {{.logits_row = 1, .temperature = 1.0f, .u = 0.5},
          {.logits_row = 2, .temperature = 1.0f, .u = 0.5},
          {.logits_row = 0, .temperature = 2.0f, .top_k = 10, .u = 0.1},
          seeded};
  const std::vector<GreedyResult> got = RunSample(logits, nullptr, vocab, rows);
  EXPECT_EQ(got[0].status, GreedyResult::kNanOrInf);
  EXPECT_EQ(got[1].status, GreedyResult::kNoFiniteLogit);
  EXPECT_EQ(got[2].status, GreedyResult::kOk);
  ASSERT_EQ(got[3].status, GreedyResult::kOk);
  EXPECT_EQ(got[3].token, alone);
}

}  // namespace
}  // namespace pagellm::kernels::cuda
