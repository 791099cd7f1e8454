#include "worker/engine/stop_checker.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

constexpr int32_t kEos = 2;
constexpr int32_t kText = 100;  // Any ordinary token id.

class StopCheckerTest : public ::testing::Test {
 protected:
  void Init(SamplingParams params) {
    params_ = std::move(params);
    ASSERT_TRUE(params_.Validate(1000).ok());
    checker_ = std::make_unique<StopChecker>(params_, std::vector<int32_t>{kEos});
    emitted_.clear();
    last_ = StopDecision{};
  }

  // Feeds one token; returns the text released by this call.
  std::string Feed(std::string_view delta, int32_t token = kText) {
    std::string out;
    last_ = checker_->Append(token, delta, &out);
    emitted_ += out;
    return out;
  }

  // Feeds ordinary tokens until one finishes the sequence.
  void FeedAll(const std::vector<std::string>& deltas) {
    for (const std::string& d : deltas) {
      Feed(d);
      if (last_.finished()) return;
    }
  }

  SamplingParams params_;
  std::unique_ptr<StopChecker> checker_;
  StopDecision last_;
  std::string emitted_;  // Everything released so far.
};

TEST_F(StopCheckerTest, StopStringAcrossTokensIsHeldBackThenCut) {
  Init({.max_tokens = 100, .stop = {"###"}});
  EXPECT_EQ(Feed("Hello #"), "Hello ");
  EXPECT_EQ(checker_->num_held_back_bytes(), 1u);
  EXPECT_EQ(Feed("#"), "");
  EXPECT_EQ(checker_->num_held_back_bytes(), 2u);
  EXPECT_FALSE(last_.finished());
  EXPECT_EQ(Feed("# world"), "");
  EXPECT_EQ(last_.finish_reason, FinishReason::kStop);
  EXPECT_EQ(last_.stop_string_index, 0);
  EXPECT_EQ(last_.stop_string, "###");
  EXPECT_EQ(emitted_, "Hello ");
  EXPECT_TRUE(checker_->finished());
}

TEST_F(StopCheckerTest, HeldBackTextIsReleasedWhenItStopsMatching) {
  Init({.max_tokens = 100, .stop = {"abc"}});
  EXPECT_EQ(Feed("xa"), "x");
  EXPECT_EQ(Feed("b"), "");
  EXPECT_EQ(Feed("d"), "abd");
  // Overlapping restarts: "aab" holds "a" back again, "aabc" stops.
  EXPECT_EQ(Feed("aab"), "a");
  EXPECT_EQ(Feed("c!"), "");
  EXPECT_TRUE(last_.finished());
  EXPECT_EQ(emitted_, "xabda");
}

TEST_F(StopCheckerTest, IncludeStopStringKeepsItAndHoldsNothingBack) {
  Init({.max_tokens = 100, .stop = {"###"}, .include_stop_str_in_output = true});
  EXPECT_EQ(Feed("Hello ##"), "Hello ##");
  EXPECT_EQ(checker_->num_held_back_bytes(), 0u);
  EXPECT_EQ(Feed("# world"), "#");
  EXPECT_EQ(last_.finish_reason, FinishReason::kStop);
  EXPECT_EQ(emitted_, "Hello ###");
}

TEST_F(StopCheckerTest, EarliestEndingStopStringWins) {
  Init({.max_tokens = 100, .stop = {"abcd", "bc"}});
  Feed("xabcd");
  EXPECT_EQ(last_.stop_string_index, 1);
  EXPECT_EQ(emitted_, "xa");

  Init({.max_tokens = 100, .stop = {"c", "abc"}});  // Same end: the longer one.
  Feed("xabcd");
  EXPECT_EQ(last_.stop_string_index, 1);
  EXPECT_EQ(emitted_, "x");

  Init({.max_tokens = 100, .stop = {"zz", "yy"}});  // Listing order does not matter.
  Feed("ayyzz");
  EXPECT_EQ(last_.stop_string, "yy");
  EXPECT_EQ(emitted_, "a");
}

TEST_F(StopCheckerTest, UnicodeStopStrings) {
  Init({.max_tokens = 100, .stop = {"終わり", "é"}});
  EXPECT_EQ(Feed("今日は終"), "今日は");
  EXPECT_EQ(Feed("わ"), "");
  EXPECT_EQ(Feed("れ"), "終われ");  // Not a stop: released.
  EXPECT_EQ(Feed("e, "), "e, ");    // "e" is not "é".
  Feed("終わ");
  Feed("り。");
  EXPECT_EQ(last_.stop_string_index, 0);
  EXPECT_EQ(emitted_, "今日は終われe, ");

  Init({.max_tokens = 100, .stop = {"👋🏽"}, .include_stop_str_in_output = true});
  Feed("hi 👋");
  Feed("🏽 there");
  EXPECT_EQ(emitted_, "hi 👋🏽");
}

TEST_F(StopCheckerTest, EosFinishesReleasesHeldTextAndDropsItsOwnText) {
  Init({.max_tokens = 100, .stop = {"###"}});
  Feed("a #");
  Feed("</s>", kEos);
  EXPECT_EQ(last_.finish_reason, FinishReason::kStop);
  EXPECT_EQ(last_.stop_token_id, -1);
  EXPECT_EQ(last_.stop_string_index, -1);
  EXPECT_EQ(emitted_, "a #");
  EXPECT_EQ(checker_->num_held_back_bytes(), 0u);

  Init({.max_tokens = 100, .include_stop_str_in_output = true});
  Feed("a");
  Feed("</s>", kEos);
  EXPECT_EQ(emitted_, "a</s>");
}

TEST_F(StopCheckerTest, StopTokenIdsAndIgnoreEos) {
  Init({.max_tokens = 100, .ignore_eos = true, .stop_token_ids = {7}});
  Feed("a");
  Feed("<eos>", kEos);
  EXPECT_FALSE(last_.finished());
  Feed("<|end|>", 7);
  EXPECT_EQ(last_.finish_reason, FinishReason::kStop);
  EXPECT_EQ(last_.stop_token_id, 7);
  EXPECT_EQ(emitted_, "a<eos>");
}

TEST_F(StopCheckerTest, MaxTokensFinishesWithLengthAndFlushes) {
  Init({.max_tokens = 3, .stop = {"xyz"}});
  Feed("a");
  Feed("b");
  EXPECT_FALSE(last_.finished());
  Feed("x");
  EXPECT_EQ(last_.finish_reason, FinishReason::kLength);
  EXPECT_EQ(emitted_, "abx");
  EXPECT_EQ(checker_->num_output_tokens(), 3);
  EXPECT_EQ(FinishReasonName(last_.finish_reason), "length");
}

TEST_F(StopCheckerTest, StopStringBeatsLengthOnTheLastToken) {
  Init({.max_tokens = 2, .stop = {"xyz"}});
  Feed("ax");
  Feed("yz");
  EXPECT_EQ(last_.finish_reason, FinishReason::kStop);
  EXPECT_EQ(emitted_, "a");
}

TEST_F(StopCheckerTest, MinTokensDefersEveryKindOfStop) {
  Init({.max_tokens = 100, .min_tokens = 2, .stop_token_ids = {7}, .stop = {"ab"}});
  Feed("<eos>", kEos);  // Token 1: ignored.
  Feed("ab");           // Token 2: a stop string completed in the window is ignored.
  EXPECT_FALSE(last_.finished());
  EXPECT_EQ(emitted_, "<eos>ab");
  Feed("a");  // Token 3.
  Feed("b");
  EXPECT_EQ(last_.finish_reason, FinishReason::kStop);
  EXPECT_EQ(emitted_, "<eos>ab");

  Init({.max_tokens = 100, .min_tokens = 1, .stop_token_ids = {7}});
  Feed("x", 7);
  EXPECT_FALSE(last_.finished());
  Feed("y", 7);
  EXPECT_EQ(last_.stop_token_id, 7);
}

TEST(FinishReasonTest, Names) {
  EXPECT_EQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_EQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_EQ(FinishReasonName(FinishReason::kAbort), "abort");
  EXPECT_EQ(FinishReasonName(FinishReason::kNone), "");
}

// Reference: the output of a stream `text` cut by `stops` (earliest end, longer on ties).
std::string ReferenceOutput(const std::string& text, const std::vector<std::string>& stops,
                            bool include, bool* stopped) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t best = 0;
    for (const std::string& s : stops) {
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0) {
        best = std::max(best, s.size());
      }
    }
    if (best > 0) {
      *stopped = true;
      return text.substr(0, include ? end : end - best);
    }
  }
  *stopped = false;
  return text;
}

// Issue 9: the n sequences of a request share one copy of its stop strings and one automaton;
// a sequence adds only its held-back text. (Each sequence used to copy every stop string and
// build a table per string: n=128 with a 3.9 MB stop string took ~2.5 GB.)
TEST(StopConditionsTest, ParallelSamplesShareOneCopyOfTheStopStrings) {
  SamplingParams params{.max_tokens = 100};
  params.stop.assign(kMaxStopStrings, std::string(kMaxStopBytes / kMaxStopStrings, 'x'));
  ASSERT_TRUE(params.Validate(1000).ok());
  const std::shared_ptr<const StopConditions> shared =
      StopConditions::Create(params, std::vector<int32_t>{kEos});
  EXPECT_LE(shared->matcher().num_states(), static_cast<size_t>(kMaxStopBytes) + 1);
  std::vector<std::unique_ptr<StopChecker>> samples;
  for (int i = 0; i < kMaxParallelSamples; ++i)
    samples.push_back(std::make_unique<StopChecker>(shared));
  EXPECT_EQ(shared.use_count(), kMaxParallelSamples + 1);
  std::string out;
  for (auto& s : samples) {
    s->Append(kText, "xxxx", &out);
    EXPECT_EQ(s->num_held_back_bytes(), 4u);  // a prefix of the 128-byte stop string
  }
}

// Random texts, stop lists and token splits: the output never depends on the split, released
// text is never retracted, and no more than the longest stop minus one byte is held back.
TEST_F(StopCheckerTest, RandomSplitsMatchReference) {
  std::mt19937 gen(12345);
  auto random_string = [&](int min_len, int max_len) {
    std::string s(std::uniform_int_distribution<int>(min_len, max_len)(gen), 'a');
    for (char& c : s) c = "abc"[std::uniform_int_distribution<int>(0, 2)(gen)];
    return s;
  };
  for (int iter = 0; iter < 3000; ++iter) {
    SamplingParams params{.max_tokens = 1000};
    const int num_stops = std::uniform_int_distribution<int>(0, iter % 10 == 0 ? 30 : 3)(gen);
    size_t longest = 0;
    for (int i = 0; i < num_stops; ++i) {
      params.stop.push_back(random_string(1, 5));
      longest = std::max(longest, params.stop.back().size());
    }
    params.include_stop_str_in_output = iter % 2 == 1;
    const std::string text = random_string(0, 40);
    bool stopped;
    const std::string expected =
        ReferenceOutput(text, params.stop, params.include_stop_str_in_output, &stopped);

    Init(params);
    size_t pos = 0;
    while (pos < text.size() && !last_.finished()) {
      const size_t len = std::uniform_int_distribution<size_t>(0, 4)(gen);
      Feed(std::string_view(text).substr(pos, len));
      pos += len;
      ASSERT_EQ(emitted_, expected.substr(0, emitted_.size())) << "iter " << iter;
      if (!last_.finished()) {
        ASSERT_LT(checker_->num_held_back_bytes(), std::max<size_t>(longest, 1));
      }
    }
    if (!last_.finished()) Feed("", kEos);
    ASSERT_EQ(emitted_, expected) << "iter " << iter << " text " << text;
    EXPECT_EQ(last_.stop_string_index >= 0, stopped) << "iter " << iter;
  }
}

}  // namespace
}  // namespace pagellm
