// SamplingParams::Validate: vLLM's defaults, every bad field named, the edges accepted.
#include "common/sampling/sampling_params.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;

struct BadParamsCase {
  const char* field;
  void (*mutate)(SamplingParams&);
};

TEST(SamplingParamsTest, DefaultsAreValidAndMatchVllm) {
  SamplingParams params;
  EXPECT_TRUE(params.Validate(100).ok());
  EXPECT_EQ(params.temperature, 1.0f);
  EXPECT_EQ(params.max_tokens, 16);
  EXPECT_FALSE(params.IsGreedy());
  params.temperature = 0.0f;
  EXPECT_TRUE(params.IsGreedy());
}

TEST(SamplingParamsTest, ValidateNamesTheBadField) {
  const BadParamsCase cases[] = {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = NAN; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.01f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = NAN; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -2; }},
      {"lora_adapter", [](SamplingParams& p) { p.lora_adapter = std::string(129, 'a'); }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.01f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.5f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = NAN; }},
      // Issue 9: 1e-38 turns every positive logit into inf (no finite logit remains).
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 1e-38f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 1e30f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.5f; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = NAN; }},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }},
      {"min_tokens", [](SamplingParams& p) { p.min_tokens = -1; }},
      {"min_tokens", [](SamplingParams& p) { p.min_tokens = 17; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = 21; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = -1; }},
      {"prompt_logprobs", [](SamplingParams& p) { p.prompt_logprobs = 21; }},
      {"prompt_logprobs", [](SamplingParams& p) { p.prompt_logprobs = -1; }},
      {"stop_token_ids",
       [](SamplingParams& p) {
         p.stop_token_ids = {3, 100};
       }},
      {"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = {-1}; }},
      {"stop[1]",
       [](SamplingParams& p) {
         p.stop = {"ok", ""};
       }},
      {"stop[0]", [](SamplingParams& p) { p.stop = {"\xC3"}; }},  // Truncated UTF-8.
      // Issue 9: bounded stop conditions.
      {"stop", [](SamplingParams& p) { p.stop.assign(kMaxStopStrings + 1, "x"); }},
      {"stop", [](SamplingParams& p) { p.stop = {std::string(kMaxStopBytes + 1, 'x')}; }},
      {"stop",
       [](SamplingParams& p) {
         p.stop = {std::string(kMaxStopBytes / 2, 'x'), std::string(kMaxStopBytes / 2 + 1, 'y')};
       }},
      {"stop_token_ids",
       [](SamplingParams& p) { p.stop_token_ids.assign(kMaxStopTokenIds + 1, 5); }},
      // Structured output: bounded, and not with beam search.
      {"structured_output.json_schema",
       [](SamplingParams& p) {
         p.structured_output = {.kind = StructuredOutput::Kind::kJsonSchema,
                                .json_schema = std::string(kMaxStructuredBytes + 1, ' ')};
       }},
      {"structured_output.json_schema",
       [](SamplingParams& p) { p.structured_output.kind = StructuredOutput::Kind::kJsonSchema; }},
      {"structured_output.choice",
       [](SamplingParams& p) { p.structured_output.kind = StructuredOutput::Kind::kChoice; }},
      {"structured_output.choice",
       [](SamplingParams& p) {
         p.structured_output = {.kind = StructuredOutput::Kind::kChoice,
                                .choices = std::vector<std::string>(kMaxChoices + 1, "x")};
       }},
      {"structured_output.choice",
       [](SamplingParams& p) {
         p.structured_output = {.kind = StructuredOutput::Kind::kChoice, .choices = {"\xC3"}};
       }},
      {"structured_output.choice",
       [](SamplingParams& p) {
         p.structured_output = {.kind = StructuredOutput::Kind::kChoice,
                                .choices = {std::string(kMaxStructuredBytes, 'x'), "y"}};
       }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{100, 1.0f}};
       }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{5, 1.0f}, {5, 2.0f}};
       }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{5, 100.5f}};
       }},
      {"logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{5, NAN}};
       }},
      {"allowed_token_ids",
       [](SamplingParams& p) {
         p.allowed_token_ids = {1, 100};
       }},
      {"beam search",
       [](SamplingParams& p) {
         p.logit_bias = {{5, 1.0f}};
         p.temperature = 0.0f;
         p.beam_width = 2;
       }},
      {"structured_output.regex",
       [](SamplingParams& p) {
         p.structured_output.kind = StructuredOutput::Kind::kRegex;
         p.structured_output.regex = std::string(kMaxStructuredBytes + 1, 'a');
       }},
      {"structured_output.grammar",
       [](SamplingParams& p) {
         p.structured_output.kind = StructuredOutput::Kind::kGrammar;
         p.structured_output.grammar = std::string(kMaxStructuredBytes + 1, ' ');
       }},
      {"beam search",
       [](SamplingParams& p) {
         p.structured_output.kind = StructuredOutput::Kind::kJsonObject;
         p.temperature = 0.0f;
         p.beam_width = 2;
       }},
  };
  for (const BadParamsCase& c : cases) {
    SamplingParams params;
    c.mutate(params);
    absl::Status status = params.Validate(100);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(status.message(), HasSubstr(c.field));
  }
}

TEST(SamplingParamsTest, AcceptsEdgeValues) {
  SamplingParams params{.temperature = 0.0f,
                        .top_p = 1.0f,
                        .top_k = -1,
                        .min_p = 1.0f,
                        .presence_penalty = -2.0f,
                        .frequency_penalty = 2.0f,
                        .max_tokens = 1,
                        .min_tokens = 1,
                        .stop_token_ids = {0, 99},
                        .stop = {"終わり", "\n\n"},
                        .logprobs = 20};
  EXPECT_TRUE(params.Validate(100).ok()) << params.Validate(100);
  params.repetition_penalty = 1.0f / kMaxRepetitionPenalty;
  EXPECT_TRUE(params.Validate(100).ok()) << params.Validate(100);
  params.repetition_penalty = kMaxRepetitionPenalty;
  params.stop.assign(kMaxStopStrings, std::string(kMaxStopBytes / kMaxStopStrings, 'x'));
  params.stop_token_ids.assign(kMaxStopTokenIds, 7);
  EXPECT_TRUE(params.Validate(100).ok()) << params.Validate(100);
  EXPECT_FALSE(params.Validate(0).ok());
}

TEST(SamplingParamsTest, TheContextHoldsMaxTokensUnlessTheRequestEmbeds) {
  SamplingParams p;
  p.max_tokens = 10;
  EXPECT_EQ(p.MaxContext(20), 30);
  EXPECT_TRUE(p.CheckContext(20, 30).ok());
  const absl::Status over = p.CheckContext(21, 30);
  EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(over.message(),
              HasSubstr("prompt (21 tokens) + max_tokens (10) = 31 exceeds the maximum model "
                        "length of 30"));
  p.embed = true;  // nothing is generated: the input alone counts
  EXPECT_EQ(p.MaxContext(20), 20);
  EXPECT_TRUE(p.CheckContext(30, 30).ok());
  EXPECT_THAT(p.CheckContext(31, 30).message(),
              HasSubstr("the input (31 tokens) exceeds the maximum model length of 30"));
}

}  // namespace
}  // namespace pagellm
