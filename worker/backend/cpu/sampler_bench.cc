// Times one Sampler::Sample() call over realistic vocabularies.
//   build-*/bin/sampler_bench --benchmark_filter=TopP
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "worker/backend/cpu/sampler.h"

namespace pagellm {
namespace {

// Logits shaped like a language model's: mostly noise, a few clear favourites.
std::vector<float> ModelLikeLogits(int64_t vocab) {
  std::mt19937 gen(1);
  std::normal_distribution<float> noise(0.0f, 2.0f);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = noise(gen);
  for (int i = 0; i < 20; ++i) logits[(i * 7919) % vocab] += 8.0f;
  return logits;
}

void RunSampler(benchmark::State& state, const SamplingParams& params) {
  const int64_t vocab = state.range(0);
  auto sampler = Sampler::Create({.vocab_size = vocab, .eos_token_ids = {0}});
  if (!sampler.ok()) {
    state.SkipWithError(std::string(sampler.status().message()).c_str());
    return;
  }
  const std::vector<float> logits = ModelLikeLogits(vocab);
  const std::vector<int32_t> history(64, 5);
  uint64_t step = 0;
  for (auto _ : state) {
    SequenceToSample seq{.params = &params,
                         .prompt_ids = history,
                         .output_ids = absl::MakeConstSpan(history).subspan(0, step++ % 64),
                         .rng = SamplingRng(7)};
    benchmark::DoNotOptimize((*sampler)->Sample(logits, seq));
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_TopP(benchmark::State& state) {
  RunSampler(state, SamplingParams{.temperature = 0.8f, .top_p = 0.9f});
}
void BM_TopPFlat(benchmark::State& state) {  // Temperature 3 spreads the nucleus wide.
  RunSampler(state, SamplingParams{.temperature = 3.0f, .top_p = 0.9f});
}
void BM_TopKTopPPenalties(benchmark::State& state) {
  RunSampler(state, SamplingParams{.temperature = 0.8f,
                                   .top_p = 0.9f,
                                   .top_k = 50,
                                   .repetition_penalty = 1.1f,
                                   .logprobs = 5});
}
void BM_Temperature(benchmark::State& state) {
  RunSampler(state, SamplingParams{.temperature = 0.8f});
}
void BM_Greedy(benchmark::State& state) { RunSampler(state, SamplingParams{.temperature = 0.0f}); }

BENCHMARK(BM_TopP)->Arg(49152)->Arg(128256);
BENCHMARK(BM_TopPFlat)->Arg(49152)->Arg(128256);
BENCHMARK(BM_TopKTopPPenalties)->Arg(49152)->Arg(128256);
BENCHMARK(BM_Temperature)->Arg(49152)->Arg(128256);
BENCHMARK(BM_Greedy)->Arg(49152)->Arg(128256);

}  // namespace
}  // namespace pagellm

BENCHMARK_MAIN();
