// The requests of a serving benchmark (`pagellm bench`): prompts of random token ids with a
// target output length each, as vLLM's benchmarks/benchmark_serving.py builds them.
//
//   random:        input and output lengths uniform in [len * (1 - r), len * (1 + r)] for the
//                  range ratio r (vLLM's RandomDataset; r = 0 gives fixed lengths).
//   sharegpt-like: synthetic ShareGPT lengths (lognormal, means 161 input / 338 output tokens,
//                  input + output <= max_model_len), from tools/simulate/trace.h.
//
// Prompt token ids are uniform in [100, vocab_size) (ids below 100 are where models keep their
// special tokens), or in [0, vocab_size) for a vocabulary of 100 or fewer. Everything follows
// from the seed: the same options give the same requests.
#ifndef PAGELLM_TOOLS_BENCH_BENCH_DATASET_H_
#define PAGELLM_TOOLS_BENCH_BENCH_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pagellm::bench {

enum class DatasetKind { kRandom, kShareGptLike };

// "random" or "sharegpt-like" ("sharegpt_like" too). InvalidArgument otherwise.
absl::StatusOr<DatasetKind> ParseDatasetKind(const std::string& name);

// One benchmark request: sent with max_tokens = output_len and ignore_eos, so a server that
// works produces exactly output_len tokens.
struct BenchRequest {
  std::vector<int32_t> prompt_token_ids;
  int32_t output_len = 0;
};

struct DatasetOptions {
  DatasetKind kind = DatasetKind::kRandom;
  int32_t num_prompts = 200;
  // random only: the target lengths and the spread around them, range_ratio in [0, 1).
  int32_t input_len = 1024;
  int32_t output_len = 128;
  double range_ratio = 0.0;
  // The model's vocabulary (ModelInfo.vocab_size); required, > 0.
  int32_t vocab_size = 0;
  // The server's context limit (ModelInfo.max_model_len); 0 when unknown. sharegpt-like lengths
  // are clipped to it (2048 when unknown); random lengths that could exceed it are an error.
  int32_t max_model_len = 0;
  uint64_t seed = 0;
};

// The num_prompts requests the options describe. InvalidArgument for a non-positive count,
// length or vocab_size, a range_ratio outside [0, 1), or random lengths whose largest
// input + output exceeds max_model_len.
absl::StatusOr<std::vector<BenchRequest>> MakeDataset(const DatasetOptions& options);

}  // namespace pagellm::bench

#endif  // PAGELLM_TOOLS_BENCH_BENCH_DATASET_H_
