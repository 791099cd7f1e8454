// Helpers for the end-to-end tests in tests/: open a model, run greedy generation through the
// Engine in various batchings, and compute all-position logits.
#ifndef PAGELLM_TESTS_TEST_UTIL_H_
#define PAGELLM_TESTS_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/tokenizer.h"
#include "worker/backend/backend.h"
#include "worker/backend/cpu_backend.h"
#include "worker/engine/engine.h"

namespace pagellm::testing {

// True when the file or directory exists. When it does not and PAGELLM_REQUIRE_MODELS=1 (set by
// tools/test.sh and CI), a test should fail rather than skip.
bool PathExists(const std::string& path);
bool ModelsRequired();

struct TestModel {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
};

absl::StatusOr<TestModel> OpenModel(const std::string& path, const CpuBackendOptions& options);

// Greedy continuations of `prompts` (token ids), max_tokens each, ignore_eos. With
// `together`, every prompt is added before the first step; otherwise one prompt at a time.
absl::StatusOr<std::vector<std::vector<int32_t>>> GreedyGenerate(
    Backend* backend, const Tokenizer* tokenizer, const std::vector<std::vector<int32_t>>& prompts,
    int max_tokens, bool together, const EngineOptions& options = EngineOptions());

// Logits [tokens.size()][vocab] of every position of one sequence, computed in one forward
// step (prefill) through the paged cache. Frees its blocks before returning.
absl::StatusOr<std::vector<float>> AllPositionLogits(Backend* backend,
                                                     const std::vector<int32_t>& tokens);

}  // namespace pagellm::testing

#endif  // PAGELLM_TESTS_TEST_UTIL_H_
