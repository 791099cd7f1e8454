// DeviceSampler on a GPU (skipped without one) against the CPU reference sampler on the same
// logits: every kind of row in one batch -- greedy, greedy with penalties, min_tokens
// suppression, temperature / top-k / top-p / min-p draws with seeds at many output positions,
// logprobs, beam rows, a row with a bad history id, prompt-scoring rows -- must get the CPU's
// token, logprobs and status; and a seeded row's token must not depend on its batch.
#include <cuda_runtime.h>

#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "worker/backend/cpu/sampler.h"
#include "worker/backend/cuda/device_sampler.h"

namespace pagellm::cuda {
namespace {

bool HasGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

constexpr int64_t kVocab = 49152;  // SmolLM2's

class DeviceSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    sampler_ = std::make_unique<DeviceSampler>(kVocab, stream_);
    auto cpu = Sampler::Create({.vocab_size = kVocab, .eos_token_ids = eos_});
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = std::move(*cpu);
  }
  void TearDown() override {
    sampler_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Samples `rows` from `logits` on both samplers; expects the same answers.
  void ExpectSame(const std::vector<float>& logits, const std::vector<SamplingRow>& rows) {
    const int64_t num_logits = logits.size() / kVocab;
    float* d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, logits.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    const SamplingBatch batch{rows, eos_};
    SamplerOutput gpu, cpu;
    ASSERT_TRUE(sampler_->Sample(d, num_logits, batch, &gpu).ok());
    ASSERT_TRUE(cpu_->SampleBatch(logits, batch, &cpu).ok());
    cudaFree(d);
    ASSERT_EQ(gpu.rows.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      SCOPED_TRACE(i);
      const SampledRow &g = gpu.rows[i], &c = cpu.rows[i];
      ASSERT_EQ(g.status.code(), c.status.code()) << g.status << " vs " << c.status;
      if (!c.status.ok()) continue;
      if (rows[i].num_top_candidates > 0) {
        const auto gc = gpu.CandidatesOf(g), cc = cpu.CandidatesOf(c);
        ASSERT_EQ(gc.size(), cc.size());
        for (size_t k = 0; k < gc.size(); ++k) {
          EXPECT_EQ(gc[k].token_id, cc[k].token_id) << k;
          EXPECT_NEAR(gc[k].logprob, cc[k].logprob, 1e-9) << k;
        }
        continue;
      }
      EXPECT_EQ(g.result.token_id, c.result.token_id);
      if (!rows[i].seq.params->logprobs.has_value() && rows[i].score_token < 0) continue;
      EXPECT_NEAR(g.result.logprob, c.result.logprob, 1e-4);
      EXPECT_EQ(g.result.rank, c.result.rank);
      ASSERT_EQ(g.result.num_top_logprobs, c.result.num_top_logprobs);
      for (int k = 0; k < c.result.num_top_logprobs; ++k) {
        EXPECT_EQ(g.result.top_logprobs()[k].token_id, c.result.top_logprobs()[k].token_id);
        EXPECT_NEAR(g.result.top_logprobs()[k].logprob, c.result.top_logprobs()[k].logprob, 1e-4);
      }
    }
  }

  std::vector<int32_t> eos_ = {2, 0};
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<DeviceSampler> sampler_;
  std::unique_ptr<Sampler> cpu_;
};

TEST_F(DeviceSamplerTest, EveryKindOfRowMatchesTheCpuSampler) {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  constexpr int kLogitRows = 8;
  std::vector<float> logits(kLogitRows * kVocab);
  for (float& l : logits) l = normal(rng);
  for (int r = 0; r < kLogitRows; ++r) logits[r * kVocab + 2] += 12.0f;  // EOS would win
  std::vector<int32_t> prompt(300), output(200);
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  for (int32_t& t : prompt) t = id(rng);
  for (int32_t& t : output) t = id(rng) % 500;  // repeats: frequency counts above 1
  std::vector<int32_t> bad_output = {5, static_cast<int32_t>(kVocab)};

  const std::vector<SamplingParams> params = {
      {.temperature = 0.0f},
      {.temperature = 0.0f,
       .repetition_penalty = 1.3f,
       .presence_penalty = 0.2f,
       .frequency_penalty = 0.4f},
      {.temperature = 0.0f, .min_tokens = 1000, .logprobs = 5},  // EOS suppressed
      {.temperature = 1.0f, .logprobs = 3},
      {.temperature = 0.7f, .top_k = 40},
      {.temperature = 1.0f, .top_p = 0.9f},
      {.temperature = 1.3f, .top_p = 0.95f, .top_k = 1000, .min_p = 0.02f},
      {.temperature = 0.9f, .min_p = 0.05f, .repetition_penalty = 1.1f},
      {.temperature = 1.0f, .top_p = 0.8f, .min_tokens = 1000, .stop_token_ids = {7, 9}},
  };
  std::vector<SamplingRow> rows;
  for (size_t k = 0; k < params.size(); ++k) {
    for (int step : {0, 1, 17, 199}) {
      SamplingRow row;
      row.logits_row = static_cast<int32_t>((k + step) % kLogitRows);
      row.seq = SequenceToSample{.params = &params[k],
                                 .prompt_ids = prompt,
                                 .output_ids = absl::MakeConstSpan(output).subspan(0, step),
                                 .rng = SamplingRng(1000 + k)};
      rows.push_back(row);
    }
  }
  // Beam rows: 8 and 512 candidates (beam width 256), and 8 with EOS suppressed.
  const SamplingParams beam_params{.temperature = 0.0f, .beam_width = 4};
  const SamplingParams beam_min{.temperature = 0.0f, .min_tokens = 5, .beam_width = 4};
  for (auto [k, p] : {std::pair{8, &beam_params}, {512, &beam_params}, {8, &beam_min}}) {
    SamplingRow beam;
    beam.logits_row = 3;
    beam.seq.params = p;
    beam.num_top_candidates = k;
    rows.push_back(beam);
  }
  SamplingRow bad = rows[4];  // penalties (params[1]) over a history id outside the vocabulary
  bad.seq.output_ids = bad_output;
  rows.push_back(bad);
  ExpectSame(logits, rows);
  EXPECT_EQ(sampler_->last_host_rows(), 0);
  EXPECT_EQ(sampler_->last_device_rows(), static_cast<int64_t>(rows.size()) - 1);  // not `bad`
}

TEST_F(DeviceSamplerTest, ScoringRowsMatchTheCpuSamplerNextToSampledRows) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  constexpr int kLogitRows = 6;
  std::vector<float> logits(kLogitRows * kVocab);
  for (float& l : logits) l = normal(rng);
  logits[4 * kVocab + 11] = NAN;  // fails its row alone
  const SamplingParams scored{.temperature = 0.0f, .min_tokens = 3, .prompt_logprobs = 4};
  const SamplingParams none{.temperature = 0.0f, .prompt_logprobs = 0};
  std::vector<SamplingRow> rows;
  for (int r = 0; r < 5; ++r) {  // a prompt's positions 0 ... 4, then its first token
    rows.push_back({.logits_row = r,
                    .seq = {.params = r % 2 ? &none : &scored},
                    .score_token = 2 + 1000 * r});  // EOS (2) first: no suppression applies
  }
  rows.push_back({.logits_row = 5, .seq = {.params = &scored}});
  ExpectSame(logits, rows);
  EXPECT_EQ(sampler_->last_host_rows(), 5);
  EXPECT_EQ(sampler_->last_device_rows(), 1);
}

TEST_F(DeviceSamplerTest, MaskedAndBiasedRowsMatchTheCpuSamplerNextToPlainOnes) {
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(3 * kVocab);
  for (float& l : logits) l = normal(rng);
  std::vector<uint64_t> mask((kVocab + 63) / 64, 0);
  for (int t = 100; t < kVocab; t += 977) mask[t / 64] |= uint64_t{1} << (t % 64);
  const SamplingParams greedy{.temperature = 0.0f, .logprobs = 3};
  const SamplingParams sampled{.temperature = 0.9f, .top_p = 0.9f, .seed = 4};
  SamplingParams biased{.temperature = 0.0f, .logprobs = 2};
  biased.logit_bias = {{17, 50.0f}, {4000, -100.0f}};
  std::vector<SamplingRow> rows;
  for (int r = 0; r < 3; ++r) {
    rows.push_back({.logits_row = r, .seq = {.params = &greedy, .allowed_tokens = mask}});
    rows.push_back({.logits_row = r, .seq = {.params = &sampled, .allowed_tokens = mask}});
    rows.push_back({.logits_row = r, .seq = {.params = &biased}});
    rows.push_back({.logits_row = r, .seq = {.params = &greedy}});
  }
  ExpectSame(logits, rows);
  EXPECT_EQ(sampler_->last_host_rows(), 9);
  EXPECT_EQ(sampler_->last_device_rows(), 3);
}

TEST_F(DeviceSamplerTest, SeededDrawsMatchAtManyPositionsAndAnyBatch) {
  std::mt19937 rng(22);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(4 * kVocab);
  for (float& l : logits) l = normal(rng);
  const SamplingParams p{.temperature = 1.0f, .top_p = 0.95f, .top_k = 200};
  std::vector<int32_t> history(512, 11);
  std::vector<SamplingRow> rows;
  for (int step = 0; step < 256; ++step) {
    SamplingRow row;
    row.logits_row = step % 4;
    row.seq = SequenceToSample{.params = &p,
                               .output_ids = absl::MakeConstSpan(history).subspan(0, step),
                               .rng = SamplingRng(77)};
    rows.push_back(row);
  }
  ExpectSame(logits, rows);
  ExpectSame(logits, {rows[100]});
}

}  // namespace
}  // namespace pagellm::cuda
