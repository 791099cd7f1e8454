// Helpers for the end-to-end tests in tests/: open a model, run greedy generation through the
// Engine in various batchings, and compute all-position logits.
#ifndef PAGELLM_TESTS_TEST_UTIL_H_
#define PAGELLM_TESTS_TEST_UTIL_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/tokenizer.h"
#include "worker/backend/backend.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/engine/engine.h"
#include "worker/engine/testing/sampling.h"  // GreedyParams

namespace pagellm::testing {

// True when the file or directory exists. When it does not and PAGELLM_REQUIRE_MODELS=1 (set by
// tools/test.sh and CI), a test should fail rather than skip.
bool PathExists(const std::string& path);
bool ModelsRequired();

// The model a test asks for by `path`, unless PAGELLM_TEST_MODEL names another: the GPU check
// (tools/gpu/check.sh) runs the engine tests on a machine without the default model, over a
// checkpoint it generates there.
std::string TestModelPath(const std::string& path);

// In a test body or SetUp(): skips the test when its model (TestModelPath(path)) is missing,
// or fails it when PAGELLM_REQUIRE_MODELS=1.
#define PAGELLM_SKIP_WITHOUT_MODEL(path)                                            \
  do {                                                                              \
    if (!::pagellm::testing::PathExists(::pagellm::testing::TestModelPath(path))) { \
      if (::pagellm::testing::ModelsRequired()) FAIL() << (path) << " is missing";  \
      GTEST_SKIP() << (path) << " is missing (run tools/test.sh)";                  \
    }                                                                               \
  } while (0)

struct TestModel {
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<void> group;  // a tensor-parallel group's follower threads (joined last)
  std::unique_ptr<Backend> backend;
  // Reads an adapter (its path TestModelPath'd) for this model, as a worker does for runtime
  // LoRA updating.
  LoraLoader load_lora;
};

// Opens TestModelPath(path) on the CPU backend with `options`, or, with PAGELLM_TEST_DEVICE=cuda,
// on the CUDA backend with the same block size, pool, swap space and step size (the GPU
// check's run of the engine tests: preemption, sharing, beam search, prefix caching).
// "dummy:PRESET:TYPE" is a random-weight model (`--load-format dummy`) with the default model's
// tokenizer. With PAGELLM_TEST_TP=N (N > 1) the CPU backend is a tensor-parallel group of N
// ranks on threads of this process, connected by Gloo over loopback, options.threads split
// between them (OpenModelGroup).
// `lora`: adapters to serve beside the model (TestModelPath'd; the CPU backend only).
absl::StatusOr<TestModel> OpenModel(const std::string& path, const CpuBackendOptions& options,
                                    const std::vector<LoraModuleSpec>& lora = {});

// OpenModel as a tensor-parallel group of `world_size` ranks, whatever PAGELLM_TEST_TP says
// (1: the plain backend).
absl::StatusOr<TestModel> OpenModelGroup(const std::string& path, const CpuBackendOptions& options,
                                         int world_size,
                                         const std::vector<LoraModuleSpec>& lora = {});
// Bytes of one KV block of TestModelPath(path)'s model with `block_size` tokens: K and V of every
// layer and KV head in 2-byte elements (the CPU backend's f16 cache, the CUDA backend's bf16 or
// fp16 one), so that a test sizes its swap space in blocks whatever PAGELLM_TEST_MODEL is.
absl::StatusOr<int64_t> KvBlockBytes(const std::string& path, int64_t block_size);

// Greedy continuations of `prompts` (token ids), max_tokens each, ignore_eos. With
// `together`, every prompt is added before the first step; otherwise one prompt at a time.
// Internal error if the engine leaks KV blocks.
absl::StatusOr<std::vector<std::vector<int32_t>>> GreedyGenerate(
    Backend* backend, const Tokenizer* tokenizer, const std::vector<std::vector<int32_t>>& prompts,
    int max_tokens, bool together, const EngineOptions& options = EngineOptions());

// Logits [tokens.size()][vocab] of every position of one sequence, computed in one forward
// step (prefill) through the paged cache, in the pool's first blocks, with LoRA adapter
// `adapter` (-1: none). REQUIRES: no engine is using the backend (its blocks would be
// overwritten).
absl::StatusOr<std::vector<float>> AllPositionLogits(Backend* backend,
                                                     const std::vector<int32_t>& tokens,
                                                     int32_t adapter = -1);

// Teacher forcing against a reference's top-1 tokens: the backend's argmax at every position
// of `tokens` (AllPositionLogits, with `adapter`) against top1[i]; positions where the
// reference's top-2 trails by margin[i] >= confident_margin are counted apart as well.
struct Top1Agreement {
  int64_t agree = 0, total = 0, confident_agree = 0, confident = 0;
};
absl::Status AddTop1Agreement(Backend* backend, const std::vector<int32_t>& tokens,
                              const std::vector<int32_t>& top1, const std::vector<double>& margin,
                              double confident_margin, Top1Agreement* out, int32_t adapter = -1);

// What an engine produced, per (request id, sample index): the tokens, and for beams the
// cumulative logprob, in output order.
struct EngineRun {
  std::map<std::pair<std::string, int32_t>, std::vector<int32_t>> tokens;
  // The logprob of each token, when the request asked for logprobs.
  std::map<std::pair<std::string, int32_t>, std::vector<float>> logprobs;
  std::map<std::pair<std::string, int32_t>, double> cumulative_logprob;
  EngineStats stats;
};

// Steps `engine` until it has nothing unfinished. Internal error if that takes more than
// `max_steps` (a livelock), if a step fails, or if KV blocks (device or swap) are still held
// at the end. `between_steps`, when given, runs before each step (a test's adapter reads end
// there: Engine::AdapterRead) and says whether it did anything: the run goes on while it does,
// even with nothing for a step.
absl::StatusOr<EngineRun> RunEngine(Engine* engine, int max_steps = 100000,
                                    const std::function<bool()>& between_steps = nullptr);

// A new engine with `options` over m's backend runs `prompts` (request i is "i"; the tokenizer
// adds its BOS) with `params`, as RunEngine.
absl::StatusOr<EngineRun> RunPrompts(const TestModel& m, const EngineOptions& options,
                                     const std::vector<std::string>& prompts,
                                     const SamplingParams& params);

}  // namespace pagellm::testing

#endif  // PAGELLM_TESTS_TEST_UTIL_H_
