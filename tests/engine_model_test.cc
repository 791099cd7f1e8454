// Engine tests on the real default model (SmolLM2-135M-Instruct, Q4_1) with the CPU backend
// (worker/engine/engine_test.cc covers the engine without a model).
// Skipped when the model file is absent, unless PAGELLM_REQUIRE_MODELS=1 (then they fail).
// Generations are kept short: the whole suite should run in well under a minute on 2 cores.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/engine/engine.h"
#include "worker/engine/testing/sampling.h"
#include "worker/model/model_loader.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;

constexpr char kModelPath[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr int64_t kNumBlocks = 64;  // of 16 tokens: 1024 tokens in the shared pool

struct Model {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
};

absl::StatusOr<Model> OpenModel(int64_t num_kv_blocks) {
  LoadModelOptions lo;
  lo.path = kModelPath;
  absl::StatusOr<LoadedModel> loaded = LoadModel(lo);
  if (!loaded.ok()) return loaded.status();
  CpuBackendOptions bo;
  bo.threads = 2;
  bo.num_kv_blocks = num_kv_blocks;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCpuBackend(loaded->checkpoint, bo);
  if (!backend.ok()) return backend.status();
  return Model{std::move(loaded->tokenizer), std::move(*backend)};
}

// Everything one request produced, accumulated over steps.
struct Completion {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<SampleResult> logprobs;
  std::vector<SampleResult> prompt_logprobs;
  FinishReason finish = FinishReason::kNone;
};
using Completions = std::map<std::string, Completion>;

SamplingParams Greedy(int32_t max_tokens) { return testing::GreedyParams(max_tokens); }

SamplingParams Seeded(uint64_t seed, int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  p.seed = seed;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kModelPath)) return;
    absl::StatusOr<Model> m = OpenModel(kNumBlocks);
    if (m.ok()) {
      shared_ = new Model(std::move(*m));
    } else {
      load_error_ = new absl::Status(m.status());
    }
  }
  static void TearDownTestSuite() {
    delete shared_;
    shared_ = nullptr;
    delete load_error_;
    load_error_ = nullptr;
  }

  void SetUp() override {
    if (!std::filesystem::exists(kModelPath)) {
      const char* req = std::getenv("PAGELLM_REQUIRE_MODELS");
      if (req != nullptr && std::strcmp(req, "1") == 0) {
        FAIL() << kModelPath << " is missing and PAGELLM_REQUIRE_MODELS=1";
      }
      GTEST_SKIP() << kModelPath << " is missing (run the model fetch script)";
    }
    ASSERT_EQ(load_error_, nullptr) << *load_error_;
    ASSERT_NE(shared_, nullptr);
  }

  static const Tokenizer* tokenizer() { return shared_->tokenizer.get(); }
  static Backend* backend() { return shared_->backend.get(); }
  static std::vector<int32_t> Ids(const std::string& text) {
    return tokenizer()->Encode(text, /*add_special_tokens=*/true, /*parse_special=*/false);
  }
  static int64_t Vocab() { return backend()->config().vocab_size; }

  static std::unique_ptr<Engine> NewEngine(Backend* b, const EngineOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(b, tokenizer(), options);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(*e) : nullptr;
  }
  static std::unique_ptr<Engine> NewEngine(const EngineOptions& options = {}) {
    return NewEngine(backend(), options);
  }

  // Appends one step's outputs to `c`, checking that nothing follows a finish.
  static void Collect(const std::vector<SequenceOutput>& outs, Completions* c) {
    for (const SequenceOutput& o : outs) {
      Completion& r = (*c)[o.request_id];
      EXPECT_EQ(r.finish, FinishReason::kNone) << o.request_id << " produced after finishing";
      r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      r.text += o.text;
      r.logprobs.insert(r.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
      if (!o.prompt_logprobs.empty()) {
        EXPECT_EQ(o.sample_index, 0);
        EXPECT_TRUE(r.tokens.empty()) << o.request_id << ": prompt logprobs after a token";
        r.prompt_logprobs.insert(r.prompt_logprobs.end(), o.prompt_logprobs.begin(),
                                 o.prompt_logprobs.end());
      }
      r.finish = o.finish_reason;
    }
  }
  // Steps until nothing is unfinished (bounded, so a livelock fails instead of hanging).
  static void Drain(Engine* e, Completions* c) {
    std::vector<SequenceOutput> outs;
    for (int i = 0; i < 10000 && e->HasUnfinished(); ++i) {
      outs.clear();
      absl::Status st = e->Step(&outs);
      ASSERT_TRUE(st.ok()) << st;
      Collect(outs, c);
    }
    EXPECT_FALSE(e->HasUnfinished()) << "engine made no progress";
  }
  static Completions RunAll(Engine* e) {
    Completions c;
    Drain(e, &c);
    EXPECT_EQ(e->num_used_blocks(), 0) << "blocks leaked";
    return c;
  }
  // One request alone in a fresh engine on the shared backend.
  static Completion RunOne(const std::string& prompt, const SamplingParams& p) {
    std::unique_ptr<Engine> e = NewEngine();
    if (e == nullptr) return {};
    absl::Status st = e->AddRequest("r", Ids(prompt), p);
    EXPECT_TRUE(st.ok()) << st;
    return RunAll(e.get())["r"];
  }

  static Model* shared_;
  static absl::Status* load_error_;
};

Model* EngineTest::shared_ = nullptr;
absl::Status* EngineTest::load_error_ = nullptr;

TEST_F(EngineTest, GreedyNamesTheCapitalOfFrance) {
  SamplingParams p = Greedy(8);
  p.ignore_eos = false;
  Completion c = RunOne("The capital of France is", p);
  EXPECT_THAT(c.text, HasSubstr("Paris"));
  EXPECT_NE(c.finish, FinishReason::kNone);
  EXPECT_LE(c.tokens.size(), 8u);
}

TEST_F(EngineTest, StreamedTextMatchesTheDecodedTokens) {
  Completion c = RunOne("The capital of France is", Greedy(10));
  ASSERT_EQ(c.tokens.size(), 10u);
  EXPECT_EQ(c.finish, FinishReason::kLength);
  EXPECT_EQ(c.text, tokenizer()->Decode(c.tokens, /*skip_special=*/true));
}

TEST_F(EngineTest, CreateRejectsABudgetAboveTheBackendsBatch) {
  EngineOptions o;
  o.max_num_batched_tokens = backend()->max_batch_tokens() + 1;
  EXPECT_EQ(Engine::Create(backend(), tokenizer(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.max_num_batched_tokens = 0;
  EXPECT_EQ(Engine::Create(backend(), tokenizer(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, RejectsInvalidRequests) {
  EngineOptions o;
  o.max_model_len = 64;
  std::unique_ptr<Engine> e = NewEngine(o);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->max_model_len(), 64);
  const std::vector<int32_t> prompt(7, 100);

  EXPECT_EQ(e->AddRequest("a", {}, Greedy(4)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->AddRequest("a", {1, static_cast<int32_t>(Vocab())}, Greedy(4)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->AddRequest("a", {-1}, Greedy(4)).code(), absl::StatusCode::kInvalidArgument);

  absl::Status too_long = e->AddRequest("a", prompt, Greedy(60));  // 67 > 64
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.message(), HasSubstr("67"));
  EXPECT_THAT(too_long.message(), HasSubstr("64"));
  EXPECT_TRUE(e->AddRequest("a", prompt, Greedy(57)).ok());  // exactly 64 fits
  EXPECT_EQ(e->AddRequest("a", prompt, Greedy(4)).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(e->Abort("a").ok());
  EXPECT_FALSE(e->HasUnfinished());
  EXPECT_EQ(e->num_used_blocks(), 0);
}

TEST_F(EngineTest, RejectsARequestLargerThanTheKvPool) {
  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_NE(e, nullptr);
  // The model's 8,192 positions are lowered to what the pool of 64 blocks of 16 holds.
  EXPECT_EQ(e->max_model_len(), 64 * 16);
  // One sample of 7 + 1,100 tokens needs 70 blocks; the pool has 64.
  absl::Status st = e->AddRequest("big", std::vector<int32_t>(7, 100), Greedy(1100));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;  // beyond max_model_len
  // Two beams of 7 + 600 tokens need 2 x 38 blocks, and beams run together.
  SamplingParams beams = Greedy(600);
  beams.beam_width = 2;
  st = e->AddRequest("big", std::vector<int32_t>(7, 100), beams);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st;
  EXPECT_FALSE(e->HasUnfinished());
  // Two samples as large run one group each (engine_test.cc checks their tokens).
  SamplingParams two = Greedy(600);
  two.n = 2;
  ASSERT_TRUE(e->AddRequest("two", std::vector<int32_t>(7, 100), two).ok());
  std::vector<SequenceOutput> outs;
  ASSERT_TRUE(e->Step(&outs).ok());
  EXPECT_EQ(outs.size(), 2u);  // each sample's first token
  EXPECT_TRUE(e->Abort("two").ok());
  EXPECT_EQ(e->num_used_blocks(), 0);
  // A failed request leaves its id free.
  EXPECT_TRUE(e->AddRequest("big", std::vector<int32_t>(7, 100), Greedy(1)).ok());
  RunAll(e.get());
}

TEST_F(EngineTest, RejectsBadSamplingParams) {
  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_NE(e, nullptr);
  struct Case {
    const char* name;
    void (*mutate)(SamplingParams&);
  };
  const Case cases[] = {
      {"top_p 0", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"negative temperature", [](SamplingParams& p) { p.temperature = -1.0f; }},
      {"max_tokens 0", [](SamplingParams& p) { p.max_tokens = 0; }},
      {"min_tokens > max_tokens", [](SamplingParams& p) { p.min_tokens = p.max_tokens + 1; }},
      {"logprobs 21", [](SamplingParams& p) { p.logprobs = kMaxLogprobs + 1; }},
      {"stop token out of vocab", [](SamplingParams& p) { p.stop_token_ids = {1 << 30}; }},
      {"empty stop string", [](SamplingParams& p) { p.stop = {""}; }},
      {"n 0", [](SamplingParams& p) { p.n = 0; }},
      {"n above the cap", [](SamplingParams& p) { p.n = kMaxParallelSamples + 1; }},
      {"beam with sampling", [](SamplingParams& p) { p.beam_width = 4, p.temperature = 1.0f; }},
      {"beam with n", [](SamplingParams& p) { p.beam_width = 4, p.n = 2; }},
      {"beam with stop strings", [](SamplingParams& p) { p.beam_width = 2, p.stop = {"x"}; }},
      {"beam with logprobs", [](SamplingParams& p) { p.beam_width = 2, p.logprobs = 1; }},
  };
  for (const Case& c : cases) {
    SamplingParams p = Greedy(4);
    c.mutate(p);
    EXPECT_EQ(e->AddRequest("x", Ids("Hello"), p).code(), absl::StatusCode::kInvalidArgument)
        << c.name;
  }
  EXPECT_FALSE(e->HasUnfinished());
}

TEST_F(EngineTest, RejectsMoreParallelSequencesThanMaxNumSeqs) {
  EngineOptions o;
  o.max_num_seqs = 3;
  std::unique_ptr<Engine> e = NewEngine(o);
  ASSERT_NE(e, nullptr);
  SamplingParams p = Greedy(4);
  p.n = 4;
  absl::Status st = e->AddRequest("x", Ids("Hello"), p);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("max_num_seqs"));
  p.n = 3;
  EXPECT_TRUE(e->AddRequest("x", Ids("Hello"), p).ok());
  std::vector<SequenceOutput> outs;
  for (int i = 0; i < 100 && e->HasUnfinished(); ++i) ASSERT_TRUE(e->Step(&outs).ok());
  EXPECT_EQ(outs.size(), 3u * 4);  // three samples of four tokens
  EXPECT_EQ(e->num_used_blocks(), 0);
}

TEST_F(EngineTest, AbortWhileWaiting) {
  EngineOptions o;
  o.max_num_seqs = 1;
  std::unique_ptr<Engine> e = NewEngine(o);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->AddRequest("first", Ids("Hello there"), Greedy(3)).ok());
  ASSERT_TRUE(e->AddRequest("second", Ids("Good morning"), Greedy(3)).ok());
  std::vector<SequenceOutput> outs;
  ASSERT_TRUE(e->Step(&outs).ok());
  ASSERT_EQ(e->num_waiting(), 1);
  EXPECT_TRUE(e->Abort("second").ok());
  EXPECT_EQ(e->num_waiting(), 0);
  EXPECT_EQ(e->Abort("second").code(), absl::StatusCode::kNotFound);
  Completions c;
  Collect(outs, &c);
  Drain(e.get(), &c);
  EXPECT_EQ(c["first"].tokens.size(), 3u);
  EXPECT_EQ(c.count("second"), 0u);
  EXPECT_EQ(e->num_used_blocks(), 0);
}

TEST_F(EngineTest, AbortMidPrefill) {
  EngineOptions o;
  o.max_num_batched_tokens = 8;
  std::unique_ptr<Engine> e = NewEngine(o);
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> prompt =
      Ids("A long prompt that needs several prefill steps of eight tokens each to finish, "
          "because the engine budget allows only eight tokens per step.");
  ASSERT_GT(prompt.size(), 16u);
  ASSERT_TRUE(e->AddRequest("r", prompt, Greedy(4)).ok());
  std::vector<SequenceOutput> outs;
  ASSERT_TRUE(e->Step(&outs).ok());
  ASSERT_TRUE(e->Step(&outs).ok());
  EXPECT_TRUE(outs.empty());  // still in prefill: nothing sampled
  EXPECT_EQ(e->num_running(), 1);
  EXPECT_GT(e->num_used_blocks(), 0);
  EXPECT_TRUE(e->Abort("r").ok());
  EXPECT_FALSE(e->HasUnfinished());
  EXPECT_EQ(e->num_running(), 0);
  EXPECT_EQ(e->num_used_blocks(), 0);
  ASSERT_TRUE(e->Step(&outs).ok());
  EXPECT_TRUE(outs.empty());
  EXPECT_EQ(e->Abort("r").code(), absl::StatusCode::kNotFound);
}

TEST_F(EngineTest, AbortWhileDecodingLeavesOthersRunning) {
  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->AddRequest("stay", Ids("The capital of France is"), Greedy(6)).ok());
  ASSERT_TRUE(e->AddRequest("go", Ids("Once upon a time"), Greedy(50)).ok());
  Completions c;
  std::vector<SequenceOutput> outs;
  for (int i = 0; i < 3; ++i) {
    outs.clear();
    ASSERT_TRUE(e->Step(&outs).ok());
    Collect(outs, &c);
  }
  ASSERT_EQ(c["go"].tokens.size(), 3u);
  EXPECT_TRUE(e->Abort("go").ok());
  EXPECT_EQ(e->num_running(), 1);
  Drain(e.get(), &c);
  EXPECT_EQ(c["go"].tokens.size(), 3u);
  EXPECT_EQ(c["stay"].tokens, RunOne("The capital of France is", Greedy(6)).tokens);
  EXPECT_EQ(e->num_used_blocks(), 0);
}

TEST_F(EngineTest, SeededSamplingDoesNotDependOnTheBatch) {
  const std::string prompt = "Once upon a time, in a small village,";
  const Completion alone = RunOne(prompt, Seeded(1234, 12));
  ASSERT_EQ(alone.tokens.size(), 12u);

  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->AddRequest("other1", Ids("My favourite food is"), Seeded(7, 8)).ok());
  ASSERT_TRUE(e->AddRequest("r", Ids(prompt), Seeded(1234, 12)).ok());
  SamplingParams unseeded = Seeded(0, 16);
  unseeded.seed.reset();
  ASSERT_TRUE(e->AddRequest("other2", Ids("def fibonacci(n):"), unseeded).ok());
  Completions batched = RunAll(e.get());
  EXPECT_EQ(batched["r"].tokens, alone.tokens);
  EXPECT_EQ(batched["r"].text, alone.text);

  const Completion other_seed = RunOne(prompt, Seeded(1235, 12));
  EXPECT_NE(other_seed.tokens, alone.tokens);
}

TEST_F(EngineTest, PreemptionByRecomputeKeepsGreedyOutputs) {
  const std::vector<std::string> prompts = {"The capital of France is", "Once upon a time",
                                            "List three colors:", "def add(a, b):"};
  const int32_t max_tokens = 20;  // prompt + output: 2 blocks of 16 each
  auto run = [&](Backend* b, int64_t* preemptions) {
    std::unique_ptr<Engine> e = NewEngine(b);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_TRUE(e->AddRequest(std::to_string(i), Ids(prompts[i]), Greedy(max_tokens)).ok());
    }
    Completions c = RunAll(e.get());
    *preemptions = e->stats().preemptions();
    return c;
  };
  int64_t roomy_preemptions = -1;
  const Completions expected = run(backend(), &roomy_preemptions);
  EXPECT_EQ(roomy_preemptions, 0);

  // 5 blocks: four sequences fit while they need 1 block each, not when each needs 2.
  absl::StatusOr<Model> tiny = OpenModel(5);
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  int64_t tiny_preemptions = -1;
  const Completions got = run(tiny->backend.get(), &tiny_preemptions);
  EXPECT_GT(tiny_preemptions, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string id = std::to_string(i);
    EXPECT_EQ(got.at(id).tokens.size(), static_cast<size_t>(max_tokens)) << prompts[i];
    EXPECT_EQ(got.at(id).tokens, expected.at(id).tokens) << prompts[i];
    EXPECT_EQ(got.at(id).text, expected.at(id).text) << prompts[i];
  }
}

TEST_F(EngineTest, StopStringTruncatesTheText) {
  const std::string prompt = "The capital of France is";
  const Completion full = RunOne(prompt, Greedy(16));
  ASSERT_EQ(full.finish, FinishReason::kLength);
  ASSERT_GE(full.text.size(), 8u) << full.text;
  // A stop string from the middle of the unconstrained text: the run stops at its first match.
  const std::string stop = full.text.substr(full.text.size() / 2, 4);
  const size_t at = full.text.find(stop);
  SamplingParams p = Greedy(16);
  p.stop = {stop};
  const Completion c = RunOne(prompt, p);
  EXPECT_EQ(c.finish, FinishReason::kStop);
  EXPECT_EQ(c.text, full.text.substr(0, at)) << "stop string '" << stop << "'";
  EXPECT_LT(c.tokens.size(), full.tokens.size());
  EXPECT_TRUE(std::equal(c.tokens.begin(), c.tokens.end(), full.tokens.begin()));

  p.include_stop_str_in_output = true;
  EXPECT_EQ(RunOne(prompt, p).text, full.text.substr(0, at + stop.size()));
}

TEST_F(EngineTest, MaxTokensFinishesWithLength) {
  std::unique_ptr<Engine> e = NewEngine();
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->AddRequest("r", Ids("Count: one, two,"), Greedy(5)).ok());
  Completions c;
  std::vector<SequenceOutput> outs;
  int steps_with_tokens = 0;
  while (e->HasUnfinished()) {
    outs.clear();
    ASSERT_TRUE(e->Step(&outs).ok());
    for (const SequenceOutput& o : outs) {
      ++steps_with_tokens;
      EXPECT_EQ(o.new_token_ids.size(), 1u);
      EXPECT_EQ(o.finished(), steps_with_tokens == 5);
    }
    Collect(outs, &c);
  }
  EXPECT_EQ(c["r"].tokens.size(), 5u);
  EXPECT_EQ(c["r"].finish, FinishReason::kLength);
  EXPECT_EQ(e->stats().generated_tokens, 5);
}

TEST_F(EngineTest, LogprobsComeOnePerTokenWithTheRequestedTopN) {
  for (int32_t n : {0, 5}) {
    SCOPED_TRACE(n);
    SamplingParams p = Greedy(4);
    p.logprobs = n;
    const Completion c = RunOne("The capital of France is", p);
    ASSERT_EQ(c.tokens.size(), 4u);
    ASSERT_EQ(c.logprobs.size(), c.tokens.size());
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      const SampleResult& r = c.logprobs[i];
      EXPECT_EQ(r.token_id, c.tokens[i]);
      EXPECT_LE(r.logprob, 0.0f);
      EXPECT_EQ(r.rank, 1);  // greedy picks the most likely token
      ASSERT_EQ(r.top_logprobs().size(), static_cast<size_t>(n));
      for (size_t k = 1; k < r.top_logprobs().size(); ++k) {
        EXPECT_GE(r.top_logprobs()[k - 1].logprob, r.top_logprobs()[k].logprob);
      }
      if (n > 0) {
        EXPECT_EQ(r.top_logprobs()[0].token_id, r.token_id);
        EXPECT_FLOAT_EQ(r.top_logprobs()[0].logprob, r.logprob);
      }
    }
  }
  // Without the request, no logprobs come back.
  EXPECT_TRUE(RunOne("The capital of France is", Greedy(2)).logprobs.empty());
}

// The prompt logprobs every test below compares with: log_softmax of one prefill's logits at
// each position, for the prompt's next token, and its `top` best.
std::vector<SampleResult> ReferencePromptLogprobs(Backend* backend,
                                                  const std::vector<int32_t>& prompt, int top) {
  absl::StatusOr<std::vector<float>> logits = testing::AllPositionLogits(backend, prompt);
  EXPECT_TRUE(logits.ok()) << logits.status();
  if (!logits.ok()) return {};
  const int64_t vocab = backend->config().vocab_size;
  std::vector<SampleResult> out;
  for (size_t p = 0; p + 1 < prompt.size(); ++p) {
    const float* row = logits->data() + p * vocab;
    double max = row[0];
    for (int64_t i = 0; i < vocab; ++i) max = std::max(max, static_cast<double>(row[i]));
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(row[i] - max);
    const double log_z = max + std::log(sum);
    SampleResult r;
    r.token_id = prompt[p + 1];
    r.logprob = static_cast<float>(row[r.token_id] - log_z);
    r.rank = 1;
    for (int64_t i = 0; i < vocab; ++i) r.rank += row[i] > row[r.token_id];
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top, order.end(), [row](int32_t a, int32_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int k = 0; k < top; ++k) {
      r.top_logprobs_storage[k] = {order[k], static_cast<float>(row[order[k]] - log_z)};
    }
    r.num_top_logprobs = top;
    out.push_back(r);
  }
  return out;
}

void ExpectSamePromptLogprobs(const std::vector<SampleResult>& got,
                              const std::vector<SampleResult>& want) {
  ASSERT_EQ(got.size(), want.size()) << "one per prompt token after the first";
  for (size_t p = 0; p < want.size(); ++p) {
    SCOPED_TRACE(p + 1);
    EXPECT_EQ(got[p].token_id, want[p].token_id);
    EXPECT_NEAR(got[p].logprob, want[p].logprob, 1e-4);
    EXPECT_EQ(got[p].rank, want[p].rank);
    ASSERT_EQ(got[p].top_logprobs().size(), want[p].top_logprobs().size());
    for (size_t k = 0; k < want[p].top_logprobs().size(); ++k) {
      EXPECT_EQ(got[p].top_logprobs()[k].token_id, want[p].top_logprobs()[k].token_id);
      EXPECT_NEAR(got[p].top_logprobs()[k].logprob, want[p].top_logprobs()[k].logprob, 1e-4);
    }
  }
}

constexpr char kLongPrompt[] =
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
    "combined movable metal type, oil-based ink and a wooden press adapted from wine making. "
    "Within fifty years, presses in more than two hundred European cities had printed millions "
    "of books, and";

TEST_F(EngineTest, PromptLogprobsAreEachPrefixsNextTokenLogprob) {
  const std::vector<int32_t> prompt = Ids(kLongPrompt);
  ASSERT_GT(prompt.size(), 40u);
  const std::vector<SampleResult> want = ReferencePromptLogprobs(backend(), prompt, 5);
  SamplingParams p = Greedy(3);
  p.prompt_logprobs = 5;
  // Computed in one chunk, in chunks of 16 next to another request, and after the same prompt
  // filled the prefix cache (whose blocks must not be reused: their logits were never kept).
  for (int64_t budget : {2048, 16}) {
    SCOPED_TRACE(budget);
    std::unique_ptr<Engine> e = NewEngine({.max_num_batched_tokens = budget});
    ASSERT_TRUE(e->AddRequest("warm", prompt, Greedy(3)).ok());
    Completions warm = RunAll(e.get());
    EXPECT_TRUE(warm["warm"].prompt_logprobs.empty()) << "not asked for";
    ASSERT_TRUE(e->AddRequest("other", Ids("Hello there"), Greedy(8)).ok());
    ASSERT_TRUE(e->AddRequest("r", prompt, p).ok());
    Completions c = RunAll(e.get());
    ExpectSamePromptLogprobs(c["r"].prompt_logprobs, want);
    EXPECT_EQ(c["r"].tokens, warm["warm"].tokens) << "the completion is unchanged";
    EXPECT_EQ(e->stats().prefix_cache_hit_tokens, 0);
  }
  // 0 top logprobs: each prompt token's own logprob and rank only.
  p.prompt_logprobs = 0;
  const Completion c = RunOne(kLongPrompt, p);
  ASSERT_EQ(c.prompt_logprobs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(c.prompt_logprobs[i].top_logprobs().empty());
    EXPECT_NEAR(c.prompt_logprobs[i].logprob, want[i].logprob, 1e-4);
  }
  // A one-token prompt has none.
  EXPECT_TRUE(RunOne("Hi", p).prompt_logprobs.empty());
}

TEST_F(EngineTest, PromptLogprobsSurviveRecomputePreemptionMidPrompt) {
  // 6 blocks of 16: a decoding request grows into the blocks of a prompt being scored in small
  // chunks, which is preempted by recompute midway and later computed again from position 0;
  // positions already reported are not reported again.
  const std::vector<int32_t> prompt = Ids(kLongPrompt);
  ASSERT_GT(prompt.size(), 48u);
  ASSERT_LE(prompt.size(), 64u);
  absl::StatusOr<Model> tiny = OpenModel(6);
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  std::unique_ptr<Engine> e = NewEngine(
      tiny->backend.get(),
      {.max_num_batched_tokens = 4, .preemption_mode = PreemptionMode::kRecompute, .watermark = 0});
  std::vector<int32_t> first = Ids("Count from one to one hundred: one, two,");
  first.resize(17, first.back());
  ASSERT_TRUE(e->AddRequest("decoding", first, Greedy(40)).ok());
  SamplingParams p = Greedy(2);
  p.prompt_logprobs = 2;
  ASSERT_TRUE(e->AddRequest("scored", prompt, p).ok());
  Completions c = RunAll(e.get());
  EXPECT_GT(e->stats().preemptions_recompute, 0);
  ExpectSamePromptLogprobs(c["scored"].prompt_logprobs,
                           ReferencePromptLogprobs(backend(), prompt, 2));
  EXPECT_EQ(c["scored"].tokens.size(), 2u);
}

TEST_F(EngineTest, ParallelSamplesShareOneSetOfPromptLogprobs) {
  SamplingParams p = Seeded(11, 4);
  p.n = 3;
  p.prompt_logprobs = 1;
  std::unique_ptr<Engine> e = NewEngine();
  const std::vector<int32_t> prompt = Ids("The quick brown fox");
  ASSERT_TRUE(e->AddRequest("r", prompt, p).ok());
  std::vector<SampleResult> prompt_logprobs;
  std::map<int32_t, int64_t> tokens;  // per sample
  std::vector<SequenceOutput> outs;
  while (e->HasUnfinished()) {
    outs.clear();
    ASSERT_TRUE(e->Step(&outs).ok());
    for (const SequenceOutput& o : outs) {
      if (!o.prompt_logprobs.empty()) {
        EXPECT_EQ(o.sample_index, 0);
        EXPECT_TRUE(tokens.empty()) << "prompt logprobs after a token";
      }
      prompt_logprobs.insert(prompt_logprobs.end(), o.prompt_logprobs.begin(),
                             o.prompt_logprobs.end());
      tokens[o.sample_index] += static_cast<int64_t>(o.new_token_ids.size());
    }
  }
  EXPECT_EQ(e->num_used_blocks(), 0);
  ExpectSamePromptLogprobs(prompt_logprobs, ReferencePromptLogprobs(backend(), prompt, 1));
  EXPECT_EQ(tokens, (std::map<int32_t, int64_t>{{0, 4}, {1, 4}, {2, 4}}));
}

}  // namespace
}  // namespace pagellm
