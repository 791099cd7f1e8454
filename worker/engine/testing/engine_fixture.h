// Test support for the engine tests without a model (engine_test.cc, engine_resume_test.cc): a
// ScriptedBackend (whose "model" is a rule of each sequence's whole context, read back through
// its paged KV blocks) over the mock byte tokenizer, and runs that collect an engine's outputs.
#ifndef PAGELLM_WORKER_ENGINE_TESTING_ENGINE_FIXTURE_H_
#define PAGELLM_WORKER_ENGINE_TESTING_ENGINE_FIXTURE_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "worker/backend/mock/mock_backend.h"
#include "worker/backend/testing/scripted_backend.h"
#include "worker/engine/engine.h"
#include "worker/engine/testing/sampling.h"

namespace pagellm::testing {

inline constexpr int32_t kEos = 256;  // the mock tokenizer's <|endoftext|>

inline SamplingParams Greedy(int32_t max_tokens) { return GreedyParams(max_tokens); }

inline std::vector<int32_t> Prompt(int32_t first, int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((first + 13 * i) % 200 + 32);
  return p;
}

struct RunResult {
  std::map<std::pair<std::string, int32_t>, std::vector<int32_t>> tokens;
  std::map<std::pair<std::string, int32_t>, FinishReason> finish;
  std::map<std::pair<std::string, int32_t>, double> cumulative_logprob;
  std::vector<absl::Status> step_errors;
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokenizer = MockTokenizer();
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
  }

  // A backend over the mock tokenizer's 257-token vocabulary.
  void MakeBackend(ScriptedBackendOptions o = {}) {
    o.vocab_size = 257;
    backend_ = std::make_unique<ScriptedBackend>(o);
  }
  std::unique_ptr<Engine> NewEngine(EngineOptions o = {}) {
    auto e = Engine::Create(backend_.get(), tokenizer_.get(), o);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(*e) : nullptr;
  }
  // Steps until idle (bounded), collecting everything; checks that no block is left held.
  static RunResult Drain(Engine* e) {
    RunResult run;
    std::vector<SequenceOutput> outs;
    for (int i = 0; i < 5000 && e->HasUnfinished(); ++i) {
      outs.clear();
      absl::Status st = e->Step(&outs);
      if (!st.ok()) run.step_errors.push_back(st);
      for (const SequenceOutput& o : outs) {
        const auto key = std::make_pair(o.request_id, o.sample_index);
        auto& t = run.tokens[key];
        t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        run.finish[key] = o.finish_reason;
        run.cumulative_logprob[key] = o.cumulative_logprob;
      }
    }
    EXPECT_FALSE(e->HasUnfinished()) << "no progress";
    const BlockManager::Stats bm = e->block_manager().GetStats();
    EXPECT_EQ(bm.device_used, 0) << "device blocks leaked";
    EXPECT_EQ(bm.swap_used, 0) << "swap blocks leaked";
    return run;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ScriptedBackend> backend_;
};

// A rule with a few likely tokens, so that seeded sampling has real choices.
inline void SpreadRule(std::span<const int32_t> context, std::span<float> row) {
  std::fill(row.begin(), row.end(), -30.0f);
  const int32_t base = static_cast<int32_t>(context.size() * 7 % 200);
  for (int32_t k = 0; k < 5; ++k) row[base + k] = 1.0f - 0.1f * k;
}

// Sampling at temperature 1 with `seed` (ignore_eos, as Greedy).
inline SamplingParams Seeded(int32_t max_tokens, uint64_t seed) {
  SamplingParams p = Greedy(max_tokens);
  p.temperature = 1.0f;
  p.seed = seed;
  return p;
}

// A run of one request, output by output: its tokens, the text each output carried, and how
// it finished.
struct Outputs {
  std::vector<int32_t> tokens;
  std::vector<std::string> texts;  // one per output
  FinishReason finish = FinishReason::kNone;
  [[nodiscard]] std::string Text(size_t first = 0) const {
    std::string t;
    for (size_t i = first; i < texts.size(); ++i) t += texts[i];
    return t;
  }
};

inline Outputs RunOne(Engine* e) {
  Outputs run;
  std::vector<SequenceOutput> outs;
  for (int i = 0; i < 1000 && e->HasUnfinished(); ++i) {
    outs.clear();
    EXPECT_TRUE(e->Step(&outs).ok());
    for (const SequenceOutput& o : outs) {
      run.tokens.insert(run.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      run.texts.push_back(o.text);
      if (o.finished()) run.finish = o.finish_reason;
    }
  }
  EXPECT_EQ(e->block_manager().GetStats().device_used, 0);
  return run;
}

}  // namespace pagellm::testing

#endif  // PAGELLM_WORKER_ENGINE_TESTING_ENGINE_FIXTURE_H_
