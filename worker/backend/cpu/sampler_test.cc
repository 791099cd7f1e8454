#include "worker/backend/cpu/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits whose softmax is exactly proportional to `probs` (up to float rounding).
std::vector<float> LogitsFor(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::vector<float> RandomLogits(int64_t vocab, uint32_t seed, float scale = 3.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = dist(gen);
  return logits;
}

std::vector<double> Softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    sum += p[i] = std::exp((logits[i] - max) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

class SamplerTest : public ::testing::Test {
 protected:
  void Init(int64_t vocab, std::vector<int32_t> eos = {}) {
    auto sampler = Sampler::Create({.vocab_size = vocab, .eos_token_ids = std::move(eos)});
    ASSERT_TRUE(sampler.ok()) << sampler.status();
    sampler_ = std::move(*sampler);
    history_.assign(100000, 0);
  }

  // Samples once at output position `step` (the output history is `step` zeros).
  SampleResult Sample(const std::vector<float>& logits, const SamplingParams& params,
                      uint64_t seed = 0, size_t step = 0) {
    SequenceToSample seq{.params = &params,
                         .output_ids = absl::MakeConstSpan(history_).subspan(0, step),
                         .rng = SamplingRng(seed)};
    absl::StatusOr<SampleResult> result = sampler_->Sample(logits, seq);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : SampleResult{};
  }

  // Counts tokens over `draws` samples, one per output position of one seeded stream.
  std::vector<int> Histogram(const std::vector<float>& logits, const SamplingParams& params,
                             int draws, uint64_t seed = 1234) {
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < draws; ++i) ++counts[Sample(logits, params, seed, i).token_id];
    return counts;
  }

  std::unique_ptr<Sampler> sampler_;
  std::vector<int32_t> history_;
};

// Pearson's chi-square of observed counts against expected probabilities (zeros skipped).
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& probs) {
  double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0) continue;
    double e = total * probs[i];
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

// Returns the set of ids with nonzero count.
std::set<int> Support(const std::vector<int>& counts) {
  std::set<int> s;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) s.insert(static_cast<int>(i));
  }
  return s;
}

TEST_F(SamplerTest, GreedyPicksArgmaxLowestIdOnTies) {
  Init(5);
  SamplingParams params{.temperature = 0.0f};
  EXPECT_EQ(Sample({1, 3, 3, 2, -kInf}, params).token_id, 1);
  EXPECT_EQ(Sample({-5, -4, -1, -1, -2}, params).token_id, 2);
  params.top_k = 1;  // Ignored by greedy, as are top_p and the seed.
  params.top_p = 0.1f;
  EXPECT_EQ(Sample({0, 0, 0, 7, 7}, params, /*seed=*/99, /*step=*/5).token_id, 3);
}

TEST_F(SamplerTest, TemperatureFrequenciesMatchSoftmax) {
  Init(8);
  const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.0f, 1.5f, 0.2f};
  for (float temperature : {1.0f, 0.6f, 1.7f}) {
    SamplingParams params{.temperature = temperature};
    std::vector<int> counts = Histogram(logits, params, 20000);
    // 7 degrees of freedom: P(chi2 > 24.3) = 0.001.
    EXPECT_LT(ChiSquare(counts, Softmax(logits, temperature)), 24.3) << "T=" << temperature;
  }
}

TEST_F(SamplerTest, TopKKeepsExactlyTheKLargestTiesToLowerId) {
  Init(6);
  SamplingParams params{.top_k = 3};
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f, 1.0f, 3.0f, 1.0f};
  std::vector<int> counts = Histogram(logits, params, 20000);
  EXPECT_EQ(Support(counts), (std::set<int>{1, 2, 4}));
  std::vector<double> expected = Softmax({-kInf, 2.0f, 1.0f, -kInf, 3.0f, -kInf});
  EXPECT_LT(ChiSquare(counts, expected), 13.8);  // 2 dof, p = 0.001.

  params.top_k = 6;  // >= vocab: disabled.
  EXPECT_EQ(Support(Histogram(logits, params, 5000)).size(), 6u);
  params.top_k = -1;
  EXPECT_EQ(Support(Histogram(logits, params, 5000)).size(), 6u);
}

TEST_F(SamplerTest, TopPKeepsTokensWhoseMassAboveIsBelowP) {
  Init(5);
  const std::vector<float> logits = LogitsFor({0.5, 0.2, 0.15, 0.1, 0.05});
  SamplingParams params{.top_p = 0.75f};  // Mass above: 0, .5, .7 (kept), .85, .95.
  std::vector<int> counts = Histogram(logits, params, 20000);
  EXPECT_EQ(Support(counts), (std::set<int>{0, 1, 2}));
  EXPECT_LT(ChiSquare(counts, {0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0}), 13.8);

  params.top_p = 0.45f;  // Only the peak.
  EXPECT_EQ(Support(Histogram(logits, params, 2000)), (std::set<int>{0}));
  params.top_p = 0.55f;  // The token crossing p is kept.
  EXPECT_EQ(Support(Histogram(logits, params, 2000)), (std::set<int>{0, 1}));
}

TEST_F(SamplerTest, TopPOverLargeVocabMatchesFullSortReference) {
  // Wide vocab and a flat distribution make the nucleus span several doubling chunks.
  const int64_t vocab = 5000;
  Init(vocab);
  const std::vector<float> logits = RandomLogits(vocab, 7, 0.5f);
  SamplingParams params{.temperature = 0.9f, .top_p = 0.8f};

  std::vector<double> p = Softmax(logits, 0.9);
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::set<int> nucleus;
  double above = 0;
  for (int id : order) {
    if (above >= 0.8) break;
    nucleus.insert(id);
    above += p[id];
  }
  ASSERT_GT(nucleus.size(), 1000u);

  std::set<int> support = Support(Histogram(logits, params, 20000));
  EXPECT_TRUE(std::includes(nucleus.begin(), nucleus.end(), support.begin(), support.end()));
  EXPECT_GT(support.size(), nucleus.size() * 9 / 10);  // Nearly all kept tokens show up.
}

TEST_F(SamplerTest, MinPDropsTokensBelowFractionOfPeak) {
  Init(5);
  const std::vector<float> logits = LogitsFor({0.5, 0.3, 0.1, 0.06, 0.04});
  SamplingParams params{.min_p = 0.15f};  // Threshold 0.075.
  std::vector<int> counts = Histogram(logits, params, 20000);
  EXPECT_EQ(Support(counts), (std::set<int>{0, 1, 2}));
  EXPECT_LT(ChiSquare(counts, {0.5 / 0.9, 0.3 / 0.9, 0.1 / 0.9, 0, 0}), 13.8);
}

TEST_F(SamplerTest, TopKThenTopPThenMinPRenormalizeInOrder) {
  Init(6);
  const std::vector<float> logits = LogitsFor({0.3, 0.25, 0.2, 0.15, 0.06, 0.04});
  // top-k 4 -> {.3,.25,.2,.15}/.9 = {.333,.278,.222,.167}; top-p .7 keeps mass-above
  // 0, .333, .611 -> {0,1,2}; min-p .7 drops 2 (.2/.3 = .667 < .7).
  SamplingParams params{.top_p = 0.7f, .top_k = 4, .min_p = 0.7f};
  std::vector<int> counts = Histogram(logits, params, 20000);
  EXPECT_EQ(Support(counts), (std::set<int>{0, 1}));
  EXPECT_LT(ChiSquare(counts, {0.3 / 0.55, 0.25 / 0.55, 0, 0, 0, 0}), 10.8);  // 1 dof.
}

// The survivors of top-k -> top-p -> min-p by the definitions, with a full sort and doubles.
std::vector<int32_t> ReferenceKept(absl::Span<const float> logits, const SamplingParams& params) {
  const int n = static_cast<int>(logits.size());
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(n);
  for (int i = 0; i < n; ++i) p[i] = std::exp((logits[i] - max) / params.temperature);
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  if (params.top_k > 0 && params.top_k < n) order.resize(params.top_k);
  if (params.top_p < 1.0f) {
    double total = 0;
    for (int id : order) total += p[id];
    size_t kept = 0;
    for (double above = 0; kept < order.size() && above < params.top_p * total; ++kept) {
      above += p[order[kept]];
    }
    order.resize(kept);
  }
  std::vector<int32_t> kept;
  for (int id : order) {
    if (p[id] > 0 && p[id] >= params.min_p) kept.push_back(id);
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

struct TruncationCase {
  const char* name;
  int64_t vocab;
  float scale;    // Logit noise.
  float quantum;  // > 0: logits rounded to multiples of it (many ties).
  SamplingParams params;
};

// Sweeps the code paths (heap and nth_element top-k; sorted, level-bounded and histogram top-p;
// dense and listed min-p; ties) against the full-sort reference.
TEST_F(SamplerTest, TruncationMatchesFullSortReference) {
  const TruncationCase cases[] = {
      {"narrow nucleus", 50000, 2.0f, 0, {.temperature = 0.5f, .top_p = 0.5f}},
      {"wide nucleus", 50000, 2.0f, 0, {.temperature = 0.8f, .top_p = 0.9f}},
      {"flat", 50000, 2.0f, 0, {.temperature = 3.0f, .top_p = 0.9f}},
      {"very flat", 5000, 0.5f, 0, {.temperature = 0.9f, .top_p = 0.8f}},
      {"p near 1", 20000, 2.0f, 0, {.temperature = 1.0f, .top_p = 0.999f}},
      {"ties top-p", 20000, 2.0f, 0.25f, {.temperature = 1.0f, .top_p = 0.6f}},
      {"all tied", 3000, 0.0f, 0, {.temperature = 1.0f, .top_p = 0.3f}},
      {"heap top-k", 20000, 2.0f, 0, {.top_p = 0.9f, .top_k = 50}},
      {"ties top-k", 20000, 2.0f, 0.5f, {.top_k = 700}},
      {"nth top-k + histogram", 20000, 1.0f, 0, {.top_p = 0.7f, .top_k = 5000}},
      {"nth top-k ties", 20000, 2.0f, 0.25f, {.top_p = 0.95f, .top_k = 1500}},
      {"listed min-p", 20000, 2.0f, 0, {.top_k = 3000, .min_p = 0.05f}},
      {"dense min-p", 20000, 2.0f, 0, {.temperature = 0.7f, .min_p = 0.1f}},
      {"all three", 20000, 2.0f, 0, {.top_p = 0.8f, .top_k = 2000, .min_p = 0.01f}},
  };
  for (const TruncationCase& c : cases) {
    SCOPED_TRACE(c.name);
    Init(c.vocab);
    std::vector<float> logits = RandomLogits(c.vocab, 5, c.scale);
    for (int i = 0; i < 20; ++i) logits[(i * 7919) % c.vocab] += 3.0f * c.scale;
    if (c.quantum > 0) {
      for (float& l : logits) l = std::round(l / c.quantum) * c.quantum;
    }
    for (int step = 0; step < 3; ++step) {
      const int32_t token = Sample(logits, c.params, /*seed=*/step, step).token_id;
      const std::vector<int32_t> kept = sampler_->TEST_kept_ids();
      EXPECT_EQ(kept, ReferenceKept(logits, c.params));
      EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), token));
    }
  }
}

TEST_F(SamplerTest, DenseSamplingAcrossBlocksMatchesSoftmax) {
  // Ten live tokens in different 512-id blocks; the rest are negligible.
  Init(6000);
  std::vector<float> logits(6000, -60.0f);
  std::vector<int> live;
  for (int i = 0; i < 10; ++i) {
    live.push_back(i * 587 + 3);
    logits[live.back()] = 0.2f * i;
  }
  for (float min_p : {0.0f, 0.5f}) {
    SamplingParams params{.min_p = min_p};
    std::vector<int> counts = Histogram(logits, params, 20000);
    std::vector<double> p = Softmax(logits);
    std::vector<int> live_counts;
    std::vector<double> live_p;
    for (int id : live) {
      const bool kept = p[id] >= min_p * p[live.back()];
      live_counts.push_back(counts[id]);
      live_p.push_back(kept ? p[id] : 0.0);
    }
    double sum = std::accumulate(live_p.begin(), live_p.end(), 0.0);
    for (double& x : live_p) x /= sum;
    for (size_t i = 0; i < live.size(); ++i) {
      if (live_p[i] == 0) {
        EXPECT_EQ(live_counts[i], 0);
      }
    }
    EXPECT_EQ(std::accumulate(live_counts.begin(), live_counts.end(), 0), 20000);
    EXPECT_LT(ChiSquare(live_counts, live_p), 27.9);  // <= 9 dof, p = 0.001.
  }
}

TEST_F(SamplerTest, PenaltiesFollowTheFormulasExactly) {
  Init(8);
  const std::vector<float> logits = {1.5f, -0.5f, 2.0f, 0.0f, -3.0f, 0.7f, 4.0f, -1.25f};
  const std::vector<int32_t> prompt = {1, 2, 2, 7};
  const std::vector<int32_t> output = {2, 3, 3, 5, 3};
  SamplingParams params{.temperature = 0.0f,
                        .repetition_penalty = 1.3f,
                        .presence_penalty = 0.25f,
                        .frequency_penalty = 0.4f};

  std::vector<float> expected = logits;
  std::map<int, int> counts;
  for (int32_t t : output) ++counts[t];
  std::set<int> seen(prompt.begin(), prompt.end());
  seen.insert(output.begin(), output.end());
  for (int t : seen) {
    float& v = expected[t];
    v = v > 0 ? v / 1.3f : v * 1.3f;
    v -= 0.4f * static_cast<float>(counts[t]);
    if (counts[t] > 0) v -= 0.25f;
  }

  SequenceToSample seq{.params = &params, .prompt_ids = prompt, .output_ids = output};
  ASSERT_TRUE(sampler_->Sample(logits, seq).ok());
  absl::Span<const float> got = sampler_->TEST_penalized_logits();
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "token " << i;

  // A second call with no history sees the raw logits again (scratch was cleared).
  SequenceToSample plain{.params = &params};
  ASSERT_TRUE(sampler_->Sample(logits, plain).ok());
  EXPECT_THAT(sampler_->TEST_penalized_logits(), testing::ElementsAreArray(logits));
}

TEST_F(SamplerTest, PenaltiesCanMoveTheArgmax) {
  Init(4);
  const std::vector<float> logits = {3.0f, 2.9f, 1.0f, 0.0f};
  const std::vector<int32_t> output = {0};
  SamplingParams params{.temperature = 0.0f, .presence_penalty = 0.5f};
  SequenceToSample seq{.params = &params, .output_ids = output};
  EXPECT_EQ(sampler_->Sample(logits, seq)->token_id, 1);
  // Raising a token above the old peak is seen too.
  const std::vector<float> logits2 = {3.0f, 2.9f, 1.0f, 2.95f};
  const std::vector<int32_t> output2 = {3};
  params.presence_penalty = -0.1f;
  seq.output_ids = output2;
  EXPECT_EQ(sampler_->Sample(logits2, seq)->token_id, 3);
  // Repetition penalty from the prompt alone.
  const std::vector<int32_t> prompt = {0};
  params = SamplingParams{.temperature = 0.0f, .repetition_penalty = 1.1f};
  seq = SequenceToSample{.params = &params, .prompt_ids = prompt};
  EXPECT_EQ(sampler_->Sample(logits, seq)->token_id, 1);
}

TEST_F(SamplerTest, SameSeedSameTokensDifferentSeedDifferent) {
  Init(1000);
  const std::vector<float> logits = RandomLogits(1000, 3, 1.0f);
  SamplingParams params{.temperature = 0.8f, .top_p = 0.95f};
  auto run = [&](uint64_t seed) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 64; ++i) tokens.push_back(Sample(logits, params, seed, i).token_id);
    return tokens;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST_F(SamplerTest, SeededStreamIndependentOfBatchNeighbors) {
  const int64_t vocab = 300;
  Init(vocab);
  SamplingParams seeded{.temperature = 1.0f, .top_k = 50};
  SamplingParams other{.temperature = 1.3f, .repetition_penalty = 1.2f};
  const std::vector<int32_t> history = {4, 5, 6};
  const std::vector<float> row = RandomLogits(vocab, 11, 1.0f);

  auto seeded_token = [&](int batch_size, int position) {
    std::vector<float> logits;
    std::vector<SequenceToSample> seqs;
    for (int i = 0; i < batch_size; ++i) {
      std::vector<float> r = i == position ? row : RandomLogits(vocab, 100 + i + batch_size);
      logits.insert(logits.end(), r.begin(), r.end());
      seqs.push_back(
          i == position
              ? SequenceToSample{.params = &seeded, .output_ids = history, .rng = SamplingRng(777)}
              : SequenceToSample{.params = &other,
                                 .prompt_ids = history,
                                 .output_ids = history,
                                 .rng = SamplingRng(i)});
    }
    std::vector<SamplingRow> rows;
    for (int i = 0; i < batch_size; ++i) rows.push_back({.logits_row = i, .seq = seqs[i]});
    SamplerOutput out;
    EXPECT_TRUE(sampler_->SampleBatch(logits, {.rows = rows, .eos_token_ids = {}}, &out).ok());
    for (auto& r : out.rows) EXPECT_TRUE(r.status.ok()) << r.status;
    return out.rows[position].result.token_id;
  };
  const int32_t alone = seeded_token(1, 0);
  EXPECT_EQ(seeded_token(3, 0), alone);
  EXPECT_EQ(seeded_token(5, 2), alone);
  EXPECT_EQ(seeded_token(8, 7), alone);
}

TEST_F(SamplerTest, RngDrawDependsOnlyOnSeedAndStep) {
  SamplingRng a(5), b(5), c(6);
  for (uint64_t step : {0ull, 1ull, 1000ull}) {
    EXPECT_EQ(a.Uniform(step), b.Uniform(step));
    EXPECT_NE(a.Uniform(step), c.Uniform(step));
    EXPECT_GE(a.Uniform(step), 0.0);
    EXPECT_LT(a.Uniform(step), 1.0);
  }
  EXPECT_NE(a.Uniform(0), a.Uniform(1));
  EXPECT_EQ(SamplingRng::ForRequest(SamplingParams{.seed = 9}).seed(), 9u);
  EXPECT_NE(SamplingRng::ForRequest({}).seed(), SamplingRng::ForRequest({}).seed());
}

TEST_F(SamplerTest, MinTokensSuppressesEosAndStopTokens) {
  Init(6, /*eos=*/{5});
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 8.0f, 3.0f, 9.0f};
  SamplingParams params{.temperature = 0.0f, .min_tokens = 3, .stop_token_ids = {3}};
  EXPECT_EQ(Sample(logits, params, 0, /*step=*/0).token_id, 4);
  EXPECT_EQ(Sample(logits, params, 0, /*step=*/2).token_id, 4);
  EXPECT_EQ(Sample(logits, params, 0, /*step=*/3).token_id, 5);
  params.ignore_eos = true;  // EOS is then an ordinary token and not suppressed.
  EXPECT_EQ(Sample(logits, params, 0, /*step=*/0).token_id, 5);

  // Sampled (not greedy) draws never produce them either.
  params = SamplingParams{.temperature = 1.0f, .min_tokens = 100000, .stop_token_ids = {3}};
  std::set<int> support = Support(Histogram(logits, params, 3000));
  EXPECT_EQ(support.count(3) + support.count(5), 0u);
}

TEST_F(SamplerTest, AllowedTokensMaskRestrictsTheChoiceButNotTheLogprobs) {
  Init(130);  // three mask words, the last one partial
  const std::vector<float> logits = RandomLogits(130, 3);
  std::vector<uint64_t> mask(3, 0);
  const std::vector<int> allowed = {7, 64, 100, 129};
  for (int t : allowed) mask[t / 64] |= uint64_t{1} << (t % 64);
  SamplingParams greedy{.temperature = 0.0f, .logprobs = 2};
  SequenceToSample seq{.params = &greedy, .rng = SamplingRng(0), .allowed_tokens = mask};
  absl::StatusOr<SampleResult> r = sampler_->Sample(logits, seq);
  ASSERT_TRUE(r.ok()) << r.status();
  int best = allowed[0];
  for (int t : allowed) best = logits[t] > logits[best] ? t : best;
  EXPECT_EQ(r->token_id, best);
  const std::vector<double> raw = Softmax(logits);  // logprobs describe the model, unmasked
  EXPECT_NEAR(r->logprob, std::log(raw[best]), 1e-5);
  EXPECT_EQ(r->top_logprobs()[0].token_id,
            std::max_element(logits.begin(), logits.end()) - logits.begin());

  // Sampled: only allowed tokens, in proportion to their probabilities.
  SamplingParams sampled{.temperature = 1.0f};
  std::vector<int> counts(130, 0);
  for (int i = 0; i < 4000; ++i) {
    SequenceToSample s{.params = &sampled,
                       .output_ids = absl::MakeConstSpan(history_).subspan(0, i),
                       .rng = SamplingRng(9),
                       .allowed_tokens = mask};
    absl::StatusOr<SampleResult> x = sampler_->Sample(logits, s);
    ASSERT_TRUE(x.ok()) << x.status();
    ++counts[x->token_id];
  }
  EXPECT_EQ(Support(counts), std::set<int>(allowed.begin(), allowed.end()));
  std::vector<double> p(130, 0.0);
  double mass = 0;
  for (int t : allowed) mass += raw[t];
  for (int t : allowed) p[t] = raw[t] / mass;
  EXPECT_LT(ChiSquare(counts, p), 16.27);  // 3 degrees of freedom, p = 0.001

  // Nothing allowed: the row fails; a mask of the wrong size is refused.
  const std::vector<uint64_t> none(3, 0);
  seq.allowed_tokens = none;
  EXPECT_EQ(sampler_->Sample(logits, seq).status().code(), absl::StatusCode::kFailedPrecondition);
  const std::vector<uint64_t> short_mask(2, ~uint64_t{0});
  seq.allowed_tokens = short_mask;
  EXPECT_EQ(sampler_->Sample(logits, seq).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SamplerTest, LogitBiasShiftsTheChoiceBeforePenaltiesNotTheLogprobs) {
  Init(5);
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.5f, -1.0f};
  SamplingParams p{.temperature = 0.0f, .logprobs = 0};
  p.logit_bias = {{1, -100.0f}, {3, 1.0f}};
  SampleResult r = Sample(logits, p);
  EXPECT_EQ(r.token_id, 2);                                    // 3 - 100, 2, 0.5 + 1: token 2 leads
  EXPECT_NEAR(r.logprob, std::log(Softmax(logits)[2]), 1e-6);  // raw
  p.logit_bias = {{4, 4.5f}};
  EXPECT_EQ(Sample(logits, p).token_id, 4);  // -1 + 4.5 beats 3
  // Applied before the repetition penalty, as vLLM: 3 + 1 = 4 > 0 is divided by 2 -> 2 < 2.5.
  p.logit_bias = {{1, 1.0f}, {2, 0.5f}};
  p.repetition_penalty = 2.0f;
  SequenceToSample seq{.params = &p, .output_ids = {}, .rng = SamplingRng(0)};
  const std::vector<int32_t> prompt = {1};
  seq.prompt_ids = prompt;
  absl::StatusOr<SampleResult> x = sampler_->Sample(logits, seq);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ(x->token_id, 2);
  // Sampled: a -100 bias removes a token in practice.
  SamplingParams t{.temperature = 1.0f};
  t.logit_bias = {{1, -100.0f}, {2, -100.0f}};
  EXPECT_EQ(
      Support(Histogram(logits, t, 2000)).count(1) + Support(Histogram(logits, t, 2000)).count(2),
      0u);
}

TEST_F(SamplerTest, LogprobsAreRawLogSoftmax) {
  const int64_t vocab = 1000;
  Init(vocab);
  std::vector<float> logits = RandomLogits(vocab, 21, 2.0f);
  logits[17] = logits[18] = 20.0f;  // A tie at the top: lower id listed first.
  std::vector<int32_t> output = {17, 17, 3};
  // Penalties and temperature change the sampling, not the reported logprobs.
  SamplingParams params{
      .temperature = 0.7f, .top_p = 0.9f, .frequency_penalty = 1.0f, .logprobs = 5};
  SequenceToSample seq{.params = &params, .output_ids = output, .rng = SamplingRng(3)};
  absl::StatusOr<SampleResult> r = sampler_->Sample(logits, seq);
  ASSERT_TRUE(r.ok()) << r.status();

  double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  auto logprob = [&](int id) { return static_cast<double>(logits[id]) - max - std::log(sum); };

  EXPECT_NEAR(r->logprob, logprob(r->token_id), 1e-5);
  int rank = 1;
  for (float l : logits) rank += l > logits[r->token_id];
  EXPECT_EQ(r->rank, rank);

  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  ASSERT_EQ(r->top_logprobs().size(), 5u);
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(r->top_logprobs()[j].token_id, order[j]);
    EXPECT_NEAR(r->top_logprobs()[j].logprob, logprob(order[j]), 1e-5);
  }
  EXPECT_EQ(r->top_logprobs()[0].token_id, 17);

  params.logprobs = 0;  // Chosen token only.
  r = sampler_->Sample(logits, seq);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->top_logprobs().empty());
  EXPECT_NEAR(r->logprob, logprob(r->token_id), 1e-5);
}

TEST_F(SamplerTest, ScoringRowsReportTheGivenTokensRawLogprob) {
  // Prompt logprobs: the row's logits are the model's prediction for the prompt's next token,
  // which is reported, not sampled; penalties, temperature and min_tokens do not apply.
  const int64_t vocab = 1000;
  Init(vocab, /*eos=*/{7});
  std::vector<float> logits = RandomLogits(vocab, 5, 2.0f);
  logits[7] = 30.0f;  // EOS is the likeliest token: min_tokens must not hide it here
  const std::vector<float> second = RandomLogits(vocab, 6, 2.0f);
  logits.insert(logits.end(), second.begin(), second.end());
  const std::vector<int32_t> output = {3, 3};
  SamplingParams params{
      .temperature = 0.7f, .frequency_penalty = 2.0f, .min_tokens = 5, .prompt_logprobs = 3};
  const SequenceToSample seq{.params = &params, .output_ids = output, .rng = SamplingRng(1)};
  const std::vector<SamplingRow> rows = {{.logits_row = 0, .seq = seq, .score_token = 3},
                                         {.logits_row = 1, .seq = seq, .score_token = 7}};
  SamplerOutput out;
  ASSERT_TRUE(sampler_->SampleBatch(logits, {.rows = rows, .eos_token_ids = {7}}, &out).ok());
  for (int r = 0; r < 2; ++r) {
    const SampleResult& got = out.rows[r].result;
    ASSERT_TRUE(out.rows[r].status.ok()) << out.rows[r].status;
    const float* row = logits.data() + r * vocab;
    double max = *std::max_element(row, row + vocab), sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
    auto logprob = [&](int id) { return static_cast<double>(row[id]) - max - std::log(sum); };
    const int32_t token = rows[r].score_token;
    EXPECT_EQ(got.token_id, token);
    EXPECT_NEAR(got.logprob, logprob(token), 1e-5);
    int rank = 1;
    for (int64_t i = 0; i < vocab; ++i) rank += row[i] > row[token];
    EXPECT_EQ(got.rank, rank);
    std::vector<int> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
    ASSERT_EQ(got.top_logprobs().size(), 3u) << "prompt_logprobs, not logprobs (unset)";
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(got.top_logprobs()[j].token_id, order[j]);
      EXPECT_NEAR(got.top_logprobs()[j].logprob, logprob(order[j]), 1e-5);
    }
  }
  EXPECT_EQ(out.rows[0].result.top_logprobs()[0].token_id, 7);

  // A scoring row the backend cannot honour is refused before anything is scored.
  for (const SamplingRow& bad : std::vector<SamplingRow>{
           {.logits_row = 0, .seq = seq, .score_token = static_cast<int32_t>(vocab)},
           {.logits_row = 0, .seq = seq, .num_top_candidates = 2, .score_token = 1}}) {
    EXPECT_EQ(sampler_->SampleBatch(logits, {.rows = {&bad, 1}, .eos_token_ids = {7}}, &out).code(),
              absl::StatusCode::kInvalidArgument);
  }
  SamplingParams no_prompt_logprobs;
  const SamplingRow unasked{
      .logits_row = 0, .seq = {.params = &no_prompt_logprobs}, .score_token = 1};
  EXPECT_EQ(
      sampler_->SampleBatch(logits, {.rows = {&unasked, 1}, .eos_token_ids = {7}}, &out).code(),
      absl::StatusCode::kInvalidArgument);
  // NaN logits fail the row alone.
  logits[vocab + 5] = NAN;
  ASSERT_TRUE(sampler_->SampleBatch(logits, {.rows = rows, .eos_token_ids = {7}}, &out).ok());
  EXPECT_TRUE(out.rows[0].status.ok());
  EXPECT_EQ(out.rows[1].status.code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SamplerTest, RejectsBadInputsWithoutCorruptingScratch) {
  Init(4);
  SamplingParams params{.temperature = 0.0f, .frequency_penalty = 1.0f};
  const std::vector<int32_t> bad_history = {1, 4};
  SequenceToSample seq{.params = &params, .output_ids = bad_history};
  const std::vector<float> logits = {1.0f, 2.0f, 0.0f, 0.0f};
  absl::StatusOr<SampleResult> r = sampler_->Sample(logits, seq);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("token id 4"));

  SequenceToSample plain{.params = &params};
  EXPECT_EQ(sampler_->Sample(logits, plain)->token_id, 1);  // Token 1's count was cleared.
  EXPECT_EQ(sampler_->Sample({1.0f, 2.0f}, plain).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sampler_->Sample({1.0f, NAN, 0.0f, 0.0f}, plain).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(sampler_->Sample({1.0f, kInf, 0.0f, 0.0f}, plain).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(sampler_->Sample({-kInf, -kInf, -kInf, -kInf}, plain).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // A row that reads past the logits is refused before anything is sampled.
  const std::vector<SamplingRow> rows = {{.logits_row = 0, .seq = plain},
                                         {.logits_row = 1, .seq = plain}};
  SamplerOutput out;
  EXPECT_EQ(sampler_->SampleBatch(logits, {.rows = rows, .eos_token_ids = {}}, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(out.rows.empty());
}

TEST_F(SamplerTest, CreateRejectsBadOptions) {
  EXPECT_FALSE(Sampler::Create({.vocab_size = 0}).ok());
  EXPECT_FALSE(Sampler::Create({.vocab_size = 10, .eos_token_ids = {10}}).ok());
  EXPECT_TRUE(Sampler::Create({.vocab_size = 10, .eos_token_ids = {9}}).ok());
}

// --- SamplingParams::Validate ---

// Beam-search candidates (moved here with the candidate selection from the engine's beam search;
// the engine now adds the parent's cumulative logprob).
std::vector<float> LogProbs(std::vector<double> probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

TEST(SamplerTopCandidatesTest, CandidatesAreTheBestTokensWithLogSoftmaxScores) {
  // Unnormalized: log_softmax must divide by the total (0.5 + 0.3 + 0.1 + 0.1 = 1.0 here, 2x).
  const std::vector<float> logits = LogProbs({1.0, 0.6, 0.2, 0.2});
  std::vector<TopCandidate> out;
  Sampler::AppendTopCandidates(logits, /*count=*/3, {}, &out);
  ASSERT_EQ(out.size(), 3u);
  std::vector<int32_t> tokens;
  for (const auto& c : out) tokens.push_back(c.token_id);
  EXPECT_EQ(tokens, (std::vector<int32_t>{0, 1, 2}));  // best first; the tie 2/3 goes to 2
  for (const auto& c : out) {
    const double p[] = {0.5, 0.3, 0.1};
    EXPECT_NEAR(c.logprob, std::log(p[c.token_id]), 1e-6);
  }
}

TEST(SamplerTopCandidatesTest, BannedTokensAreSkipped) {
  std::vector<TopCandidate> out;
  const std::vector<int32_t> banned = {0};
  Sampler::AppendTopCandidates(LogProbs({0.7, 0.2, 0.1}), 1, banned, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].token_id, 1);
}

}  // namespace
}  // namespace pagellm
