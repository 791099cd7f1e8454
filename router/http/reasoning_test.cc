// Reasoning split from the answer, as vLLM's deepseek_r1 and qwen3 reasoning parsers split it,
// whole and streamed in pieces of any size.
#include "router/http/reasoning.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

struct Case {
  std::string text;
  std::optional<std::string> reasoning;
  std::optional<std::string> content;
};

void ExpectSplits(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    ReasoningSplit whole = SplitReasoning(c.text);
    EXPECT_EQ(whole.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(whole.content, c.content) << c.text;
    for (size_t step : {1, 2, 3, 5, 1000}) {
      ReasoningStreamSplitter splitter;
      std::string reasoning, content;
      for (size_t i = 0; i < c.text.size(); i += step) {
        splitter.Feed(std::string_view(c.text).substr(i, step), &reasoning, &content);
      }
      splitter.Finish(&reasoning, &content);
      EXPECT_EQ(reasoning, c.reasoning.value_or("")) << c.text << " in steps of " << step;
      EXPECT_EQ(content, c.content.value_or("")) << c.text << " in steps of " << step;
    }
  }
}

TEST(ReasoningTest, ReasoningRunsToTheClosingTag) {
  ExpectSplits(
      {{"Let me think.\n</think>\n\nThe answer is 4.", "Let me think.\n", "\n\nThe answer is 4."},
       {"<think>\nhmm</think>4", "\nhmm", "4"},  // a template that leaves <think>
       {"  <think>a</think>", "a", std::nullopt},
       {"\n<think>x</think>y", "x", "y"},
       {"still thinking when cut", "still thinking when cut", std::nullopt},
       {"<think>cut short", "cut short", std::nullopt},
       {"</think>only an answer", "", "only an answer"},
       {"a <thin b </thi c</think> d <think> e", "a <thin b </thi c", " d <think> e"},
       {"<thin", "<thin", std::nullopt},
       {"", "", std::nullopt}});
}

TEST(ReasoningTest, Qwen3ThinksUnlessTheRequestTurnsThinkingOff) {
  EXPECT_TRUE(ThinksFor(ReasoningFormat::kQwen3, ""));
  EXPECT_TRUE(ThinksFor(ReasoningFormat::kQwen3, R"({"enable_thinking": true})"));
  EXPECT_FALSE(ThinksFor(ReasoningFormat::kQwen3, R"({"enable_thinking": false})"));
  EXPECT_TRUE(ThinksFor(ReasoningFormat::kDeepSeekR1, R"({"enable_thinking": false})"));
}

TEST(ReasoningTest, Names) {
  EXPECT_EQ(ReasoningFormatNamed("deepseek_r1"), ReasoningFormat::kDeepSeekR1);
  EXPECT_EQ(ReasoningFormatNamed("qwen3"), ReasoningFormat::kQwen3);
  EXPECT_FALSE(ReasoningFormatNamed("granite").has_value());
}

}  // namespace
}  // namespace pagellm
