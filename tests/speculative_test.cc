// N-gram speculation is invisible: with drafts checked by the model in the same step, every
// request generates exactly the tokens of a run without speculation -- greedy, seeded sampling
// with n = 4 and every penalty, stop strings, a tiny KV pool that preempts, a token budget that
// cuts drafts, a JSON Schema -- and the engine holds no block at the end. (Row-local kernels make a
// drafted position's logits bitwise those of the decode step it stands for; the sampler draws from
// (seed, sample, output position), so the same logits give the same token.) And it pays: on
// text that repeats its context, most drafted tokens are confirmed.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagellm {
namespace {

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

// How often drafts hold depends on the model: asserted for the default one only, not for the
// GPU check's generated checkpoints (PAGELLM_TEST_MODEL), where the identities still run.
bool DefaultModel() { return testing::TestModelPath(kModel) == kModel; }

std::vector<std::string> Prompts() {
  return {
      "Tell me something about France.",
      "Write one sentence about the moon and why it matters to people.",
      "Repeat this list exactly: apples, pears, plums, apples, pears, plums, apples, pears,",
      "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):",
      "Count: one two three four five six seven eight nine ten one two three four",
      "The quick brown fox jumps over the lazy dog. The quick brown fox",
      "Write a short poem about winter.",
      "{\"name\": \"Ann\", \"age\": 31}, {\"name\": \"Bob\", \"age\": 42}, {\"name\":",
  };
}

class SpeculativeTest : public ::testing::Test {
 protected:
  void SetUp() override { PAGELLM_SKIP_WITHOUT_MODEL(kModel); }

  static testing::TestModel Open(int64_t num_kv_blocks) {
    CpuBackendOptions o;
    o.threads = 2;
    o.num_kv_blocks = num_kv_blocks;
    o.swap_space_bytes = 0;
    auto m = testing::OpenModel(kModel, o);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : testing::TestModel{};
  }

  // Runs the prompts (all, or only the one numbered `only`; or `prompts`).
  static testing::EngineRun Run(const testing::TestModel& m, const SamplingParams& p,
                                const EngineOptions& eo, int only = -1,
                                std::vector<std::string> prompts = Prompts()) {
    if (only >= 0) prompts = {prompts[only]};
    auto run = testing::RunPrompts(m, eo, prompts, p);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? std::move(*run) : testing::EngineRun{};
  }

  static EngineOptions Speculating(int32_t k, int32_t min_n, int32_t max_n) {
    EngineOptions eo;
    eo.speculative.num_speculative_tokens = k;
    eo.speculative.prompt_lookup_min = min_n;
    eo.speculative.prompt_lookup_max = max_n;
    return eo;
  }
};

void Report(const char* what, const testing::EngineRun& plain, const testing::EngineRun& spec) {
  std::printf("%s: %lld steps without speculation, %lld with; %lld of %lld drafted accepted\n",
              what, static_cast<long long>(plain.stats.steps),
              static_cast<long long>(spec.stats.steps),
              static_cast<long long>(spec.stats.spec_accepted_tokens),
              static_cast<long long>(spec.stats.spec_draft_tokens));
}

TEST_F(SpeculativeTest, GreedyTokensAreThoseOfARunWithoutSpeculation) {
  const testing::TestModel m = Open(1024);
  SamplingParams p = testing::GreedyParams(64);
  p.ignore_eos = true;
  const testing::EngineRun plain = Run(m, p, EngineOptions{});
  EXPECT_EQ(plain.stats.spec_draft_tokens, 0);
  const testing::EngineRun spec = Run(m, p, Speculating(5, 1, 3));
  Report("greedy", plain, spec);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_draft_tokens, 0);
  if (DefaultModel()) {
    EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
  }
  EXPECT_EQ(spec.stats.generated_tokens, plain.stats.generated_tokens);
  // disable_by_batch_size: 8 running sequences are a batch too large to speculate in.
  EngineOptions large = Speculating(5, 1, 3);
  large.speculative.disable_by_batch_size = 7;
  const testing::EngineRun off = Run(m, p, large);
  EXPECT_EQ(off.stats.spec_draft_tokens, 0);
  EXPECT_EQ(off.tokens, plain.tokens);
}

TEST_F(SpeculativeTest, TextThatRepeatsItsContextTakesFewerSteps) {
  if (!DefaultModel()) GTEST_SKIP() << "acceptance is the default model's";
  const testing::TestModel m = Open(1024);
  SamplingParams p = testing::GreedyParams(64);
  p.ignore_eos = true;
  for (int prompt : {2, 3}) {  // a list to repeat, code to continue
    const testing::EngineRun plain = Run(m, p, EngineOptions{}, prompt);
    const testing::EngineRun spec = Run(m, p, Speculating(5, 1, 3), prompt);
    Report(prompt == 2 ? "list" : "code", plain, spec);
    EXPECT_EQ(spec.tokens, plain.tokens);
    // Many guesses hold (51 of 56 and 34 of 83 when this was written), and the steps drop by
    // more than a third (64 to 13 and to 30).
    EXPECT_GT(spec.stats.spec_accepted_tokens * 3, spec.stats.spec_draft_tokens);
    EXPECT_LT(spec.stats.steps * 3, plain.stats.steps * 2);
  }
}

TEST_F(SpeculativeTest, SeededSamplesWithPenaltiesAndStopsAreUnchanged) {
  const testing::TestModel m = Open(1024);
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_p = 0.95f;
  p.top_k = 40;
  p.seed = 99;
  p.n = 4;
  p.max_tokens = 48;
  p.repetition_penalty = 1.1f;
  p.frequency_penalty = 0.2f;
  p.presence_penalty = 0.1f;
  p.min_tokens = 4;
  p.stop = {"\n\n\n"};
  p.logprobs = 2;
  const testing::EngineRun plain = Run(m, p, EngineOptions{});
  const testing::EngineRun spec = Run(m, p, Speculating(4, 1, 4));
  Report("n=4, sampled", plain, spec);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_EQ(spec.logprobs, plain.logprobs);
  EXPECT_EQ(spec.logprobs.size(), plain.tokens.size());
  EXPECT_GT(spec.stats.spec_draft_tokens, 0);
  if (DefaultModel()) {
    EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
  }
}

TEST_F(SpeculativeTest, StructuredOutputsDraftWithinTheirGrammar) {
  const testing::TestModel m = Open(1024);
  SamplingParams p = testing::GreedyParams(160);
  p.structured_output.kind = StructuredOutput::Kind::kJsonSchema;
  p.structured_output.json_schema = R"({"type": "array", "minItems": 3, "maxItems": 6,
      "items": {"type": "object", "required": ["name", "age", "city"], "properties": {
        "name": {"type": "string", "maxLength": 16}, "age": {"type": "integer"},
        "city": {"type": "string", "maxLength": 16}}}})";
  std::vector<std::string> prompts;
  for (const char* who : {"people", "pilots", "painters", "farmers"}) {
    prompts.push_back(std::string("<|im_start|>user\nList four ") + who +
                      " with their name, age and city as a JSON array.<|im_end|>\n"
                      "<|im_start|>assistant\n");
  }
  const testing::EngineRun plain = Run(m, p, EngineOptions{}, -1, prompts);
  const testing::EngineRun spec = Run(m, p, Speculating(5, 1, 3), -1, prompts);
  Report("json", plain, spec);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_draft_tokens, 0);
  if (DefaultModel()) {  // the keys of each further object repeat the first one's
    EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
    EXPECT_LT(spec.stats.steps, plain.stats.steps);
  }
}

TEST_F(SpeculativeTest, PreemptionAndASmallBudgetCutDraftsNotTokens) {
  SamplingParams p = testing::GreedyParams(48);
  p.ignore_eos = true;
  const testing::EngineRun plain = Run(Open(1024), p, EngineOptions{});
  // 8 sequences of up to ~80 tokens need ~40 blocks of 16; the pool has 14.
  EngineOptions eo = Speculating(8, 1, 2);
  eo.max_num_batched_tokens = 24;
  eo.preemption_mode = PreemptionMode::kRecompute;
  const testing::EngineRun spec = Run(Open(14), p, eo);
  Report("tight", plain, spec);
  EXPECT_GT(spec.stats.preemptions(), 0);
  if (DefaultModel()) {
    EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
  }
  EXPECT_EQ(spec.tokens, plain.tokens);
}

TEST_F(SpeculativeTest, BadOptionsAreRefused) {
  const testing::TestModel m = Open(64);
  EXPECT_EQ(
      Engine::Create(m.backend.get(), m.tokenizer.get(), Speculating(40, 1, 3)).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      Engine::Create(m.backend.get(), m.tokenizer.get(), Speculating(4, 3, 2)).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagellm
