#include "router/http/openai_request.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(OpenAiRequestTest, CompletionFieldsMapOntoTheRouterRequest) {
  absl::StatusOr<OpenAiRequest> r = ParseCompletionRequest(R"({
      "model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
      "n": 2, "stream": true, "stream_options": {"include_usage": true}, "stop": ["a", "b"],
      "seed": -3, "logprobs": 2, "presence_penalty": 0.1, "frequency_penalty": 0.2,
      "user": "u", "top_k": 5, "min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": 1,
      "ignore_eos": true, "stop_token_ids": [3], "include_stop_str_in_output": true,
      "skip_special_tokens": false, "add_special_tokens": false, "best_of": 2,
      "suffix": null, "logit_bias": {}, "priority": -2})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, OpenAiRequest::Kind::kCompletion);
  EXPECT_EQ(r->model, "m");
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(r->n, 2);
  EXPECT_EQ(r->logprobs, 2);
  ASSERT_EQ(r->prompts.size(), 1u);
  const v1::GenerateRequest& g = r->prompts[0];
  EXPECT_EQ(g.text(), "Hello");
  EXPECT_FALSE(g.add_special_tokens());
  const v1::SamplingParams& s = g.sampling();
  EXPECT_EQ(s.max_tokens(), 7);
  EXPECT_FLOAT_EQ(s.temperature(), 0.5f);
  EXPECT_FLOAT_EQ(s.top_p(), 0.9f);
  EXPECT_EQ(s.n(), 2);
  EXPECT_THAT(s.stop(), ElementsAre("a", "b"));
  EXPECT_EQ(s.seed(), static_cast<uint64_t>(int64_t{-3}));
  EXPECT_EQ(s.logprobs(), 2);
  EXPECT_FLOAT_EQ(s.presence_penalty(), 0.1f);
  EXPECT_FLOAT_EQ(s.frequency_penalty(), 0.2f);
  EXPECT_EQ(s.top_k(), 5);
  EXPECT_FLOAT_EQ(s.min_p(), 0.05f);
  EXPECT_FLOAT_EQ(s.repetition_penalty(), 1.1f);
  EXPECT_EQ(s.min_tokens(), 1);
  EXPECT_TRUE(s.ignore_eos());
  EXPECT_THAT(s.stop_token_ids(), ElementsAre(3));
  EXPECT_TRUE(s.include_stop_str_in_output());
  EXPECT_FALSE(s.skip_special_tokens());
  EXPECT_EQ(s.priority(), -2);
}

TEST(OpenAiRequestTest, EchoWithLogprobsScoresThePrompt) {
  // The legacy completions API (lm-evaluation-harness' loglikelihood requests): the prompt's
  // logprobs lead each choice's.
  absl::StatusOr<OpenAiRequest> r =
      ParseCompletionRequest(R"({"prompt": "a b", "echo": true, "logprobs": 3, "max_tokens": 2})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->echo && r->echo_logprobs);
  EXPECT_FALSE(r->echo_only);
  EXPECT_FALSE(r->prompt_logprobs.has_value());  // not vLLM's separate field
  const v1::SamplingParams& s = r->prompts[0].sampling();
  EXPECT_EQ(s.prompt_logprobs(), 3);
  EXPECT_EQ(s.logprobs(), 3);
  EXPECT_EQ(s.max_tokens(), 2);

  // max_tokens 0: the prompt alone comes back; one token is generated and dropped (vLLM).
  r = ParseCompletionRequest(
      R"({"prompt": "a", "echo": true, "logprobs": 0, "max_tokens": 0, "min_tokens": 0})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->echo_only);
  EXPECT_EQ(r->prompts[0].sampling().max_tokens(), 1);
  EXPECT_EQ(r->prompts[0].sampling().prompt_logprobs(), 0);
  // Without echo, max_tokens 0 is left to the validator's "must be >= 1".
  r = ParseCompletionRequest(R"({"prompt": "a", "max_tokens": 0})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->echo_only);
  EXPECT_EQ(r->prompts[0].sampling().max_tokens(), 0);
}

TEST(OpenAiRequestTest, VllmPromptLogprobsOnBothEndpoints) {
  absl::StatusOr<OpenAiRequest> r =
      ParseCompletionRequest(R"({"prompt": "a", "prompt_logprobs": 2, "logprobs": 1})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompt_logprobs, 2);
  EXPECT_FALSE(r->echo_logprobs);
  EXPECT_EQ(r->prompts[0].sampling().prompt_logprobs(), 2);
  r = ParseChatRequest(R"({"messages": [{"role": "user", "content": "a"}], "prompt_logprobs": 0})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompt_logprobs, 0);
  EXPECT_EQ(r->prompts[0].sampling().prompt_logprobs(), 0);
  // With echo and logprobs too, the explicit count wins for the worker.
  r = ParseCompletionRequest(
      R"({"prompt": "a", "prompt_logprobs": 4, "echo": true, "logprobs": 1})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].sampling().prompt_logprobs(), 4);
}

// vLLM's use_beam_search: n beams (the choices), temperature 0 whatever was asked (raw
// log-probabilities rank the beams), length_penalty and early_stopping passed on; without it
// those two are ignored, as vLLM ignores them.
TEST(OpenAiRequestTest, UseBeamSearchAsksForNBeams) {
  absl::StatusOr<OpenAiRequest> r = ParseCompletionRequest(
      R"({"prompt": "a", "n": 3, "use_beam_search": true, "temperature": 0.7,
          "length_penalty": 0.5, "early_stopping": true, "max_tokens": 9})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->n, 3);
  const v1::SamplingParams& s = r->prompts[0].sampling();
  EXPECT_EQ(s.beam_width(), 3);
  EXPECT_FALSE(s.has_n());
  EXPECT_TRUE(s.has_temperature());
  EXPECT_EQ(s.temperature(), 0.0f);
  EXPECT_EQ(s.length_penalty(), 0.5f);
  EXPECT_TRUE(s.early_stopping());
  EXPECT_EQ(s.max_tokens(), 9);

  r = ParseChatRequest(
      R"({"messages": [{"role": "user", "content": "a"}], "n": 2, "use_beam_search": true,
          "stream": true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->n, 2);
  EXPECT_EQ(r->prompts[0].sampling().beam_width(), 2);
  EXPECT_FALSE(r->prompts[0].sampling().has_length_penalty());

  // One beam is greedy decoding; no beam search: the beam fields are ignored.
  r = ParseCompletionRequest(R"({"prompt": "a", "use_beam_search": true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->prompts[0].sampling().has_beam_width());
  EXPECT_EQ(r->prompts[0].sampling().temperature(), 0.0f);
  r = ParseCompletionRequest(
      R"({"prompt": "a", "n": 2, "use_beam_search": false, "length_penalty": 2.0})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->prompts[0].sampling().has_beam_width());
  EXPECT_FALSE(r->prompts[0].sampling().has_length_penalty());
  EXPECT_EQ(r->prompts[0].sampling().n(), 2);
}

TEST(OpenAiRequestTest, CacheSaltGoesToEveryPromptsRequest) {
  absl::StatusOr<OpenAiRequest> r =
      ParseCompletionRequest(R"({"prompt": ["a", "b"], "cache_salt": "s3cr3t"})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->prompts.size(), 2u);
  for (const v1::GenerateRequest& p : r->prompts) EXPECT_EQ(p.sampling().cache_salt(), "s3cr3t");
  r = ParseChatRequest(R"({"messages": [{"role": "user", "content": "a"}], "cache_salt": "s"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].sampling().cache_salt(), "s");
  r = ParseCompletionRequest(
      absl::StrCat(R"({"prompt": "a", "cache_salt": ")", std::string(1025, 'x'), R"("})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(OpenAiParam(r.status()), "cache_salt");
}

// vLLM's truncate_prompt_tokens and truncation_side, on every endpoint that takes a prompt; the
// router checks the count against the model.
TEST(OpenAiRequestTest, TruncatePromptTokensOnEveryEndpoint) {
  absl::StatusOr<OpenAiRequest> r = ParseCompletionRequest(
      R"({"prompt": ["a", "b"], "truncate_prompt_tokens": 7, "truncation_side": "left"})");
  ASSERT_TRUE(r.ok()) << r.status();
  for (const v1::GenerateRequest& p : r->prompts) {
    EXPECT_EQ(p.truncate_prompt_tokens(), 7);
    EXPECT_TRUE(p.truncate_left());
  }
  r = ParseChatRequest(
      R"({"messages": [{"role": "user", "content": "a"}], "truncate_prompt_tokens": -1})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].truncate_prompt_tokens(), -1);
  EXPECT_FALSE(r->prompts[0].truncate_left()) << "the first tokens, as HF's default side";
  r = ParseEmbeddingRequest(R"({"input": "a", "truncate_prompt_tokens": 3})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].truncate_prompt_tokens(), 3);
  absl::StatusOr<ScoreHttpRequest> s = ParseScoreRequest(
      R"({"text_1": "a", "text_2": "b", "truncate_prompt_tokens": 2, "truncation_side": "right"})",
      /*rerank=*/false);
  ASSERT_TRUE(s.ok()) << s.status();
  for (const v1::GenerateRequest& p : s->embed.prompts) EXPECT_EQ(p.truncate_prompt_tokens(), 2);
  r = ParseCompletionRequest(R"({"prompt": "a"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->prompts[0].has_truncate_prompt_tokens());
}

// vLLM's return_token_ids asks the router for the prompt's ids on the first message.
TEST(OpenAiRequestTest, ReturnTokenIdsAsksForThePromptsIds) {
  absl::StatusOr<OpenAiRequest> r =
      ParseCompletionRequest(R"({"prompt": ["a", "b"], "return_token_ids": true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->return_token_ids);
  for (const v1::GenerateRequest& p : r->prompts) EXPECT_TRUE(p.return_prompt_token_ids());
  r = ParseChatRequest(
      R"({"messages": [{"role": "user", "content": "a"}], "return_token_ids": true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->prompts[0].return_prompt_token_ids());
  r = ParseChatRequest(R"({"messages": [{"role": "user", "content": "a"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->return_token_ids);
  EXPECT_FALSE(r->prompts[0].return_prompt_token_ids());
}

TEST(OpenAiRequestTest, UnsetFieldsStayUnsetSoTheRouterDefaultsApply) {
  absl::StatusOr<OpenAiRequest> r =
      ParseCompletionRequest(R"({"prompt": "x", "temperature": null, "stop": null})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::SamplingParams& s = r->prompts[0].sampling();
  EXPECT_FALSE(s.has_max_tokens());
  EXPECT_FALSE(s.has_temperature());
  EXPECT_FALSE(s.has_logprobs());
  EXPECT_EQ(s.stop_size(), 0);
  EXPECT_FALSE(r->stream);
  EXPECT_FALSE(r->logprobs.has_value());
}

TEST(OpenAiRequestTest, PromptTakesEveryOpenAiShape) {
  auto prompts = [](const char* body) {
    absl::StatusOr<OpenAiRequest> r = ParseCompletionRequest(body);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->prompts : std::vector<v1::GenerateRequest>{};
  };
  auto p = prompts(R"({"prompt": ["a", "b"]})");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].text(), "b");
  p = prompts(R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0].token_ids().ids(), ElementsAre(1, 2, 3));
  p = prompts(R"({"prompt": [[1], [2, 3]]})");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_THAT(p[1].token_ids().ids(), ElementsAre(2, 3));
}

TEST(OpenAiRequestTest, ChatMessagesAndItsOwnFields) {
  absl::StatusOr<OpenAiRequest> r = ParseChatRequest(R"({
      "model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]},
        {"role": "developer", "content": null}],
      "max_tokens": 3, "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 4,
      "add_generation_prompt": false, "response_format": {"type": "text"},
      "chat_template_kwargs": {"enable_thinking": false, "n": 2},
      "tools": [], "tool_choice": "none", "parallel_tool_calls": false})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, OpenAiRequest::Kind::kChat);
  ASSERT_EQ(r->prompts.size(), 1u);
  const v1::ChatPrompt& chat = r->prompts[0].chat();
  ASSERT_EQ(chat.messages_size(), 3);
  EXPECT_EQ(chat.messages(0).role(), "system");
  EXPECT_EQ(chat.messages(1).content(), "Hi\nthere") << "text parts joined as vLLM joins them";
  EXPECT_EQ(chat.messages(2).role(), "developer") << "the template decides which roles it takes";
  EXPECT_EQ(chat.messages(2).content(), "");
  EXPECT_FALSE(chat.add_generation_prompt());
  EXPECT_EQ(chat.chat_template_kwargs(), R"({"enable_thinking":false,"n":2})");
  EXPECT_EQ(r->prompts[0].sampling().max_tokens(), 9) << "max_completion_tokens wins";
  EXPECT_EQ(r->logprobs, 4);
  EXPECT_EQ(r->prompts[0].sampling().logprobs(), 4);
}

TEST(OpenAiRequestTest, StructuredOutputFromEachOfItsSpellings) {
  const std::string schema = R"({"type":"object","properties":{"b":{"type":"integer"},"a":{}}})";
  // OpenAI's response_format, on chat and completions; the schema keeps its key order.
  absl::StatusOr<OpenAiRequest> r = ParseChatRequest(
      R"({"messages": [{"role": "user", "content": "a"}], "response_format": {"type":
          "json_schema", "json_schema": {"name": "n", "strict": true, "schema": )" +
      schema + "}}}");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].sampling().structured_output().json_schema(), schema);
  r = ParseCompletionRequest(R"({"prompt": "a", "response_format": {"type": "json_object"}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->prompts[0].sampling().structured_output().json_object());
  r = ParseCompletionRequest(R"({"prompt": "a", "response_format": {"type": "text"}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->prompts[0].sampling().has_structured_output());
  // vLLM's structured_outputs and its older guided_* fields (a schema may come as text).
  r = ParseCompletionRequest(
      R"({"prompt": ["a", "b"], "structured_outputs": {"choice": ["yes", "no"]}})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->prompts.size(), 2u);
  for (const auto& p : r->prompts) {
    EXPECT_THAT(p.sampling().structured_output().choice().values(), ElementsAre("yes", "no"));
  }
  r = ParseCompletionRequest(R"({"prompt": "a", "structured_outputs": {"json": )" + schema +
                             R"(, "disable_fallback": true}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].sampling().structured_output().json_schema(), schema);
  r = ParseCompletionRequest(R"({"prompt": "a", "guided_json": "{\"type\": \"object\"}",
                                 "guided_decoding_backend": "xgrammar"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].sampling().structured_output().json_schema(), R"({"type": "object"})");
  r = ParseChatRequest(
      R"({"messages": [{"role": "user", "content": "a"}], "guided_choice": ["x"]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->prompts[0].sampling().structured_output().choice().values(), ElementsAre("x"));
  r = ParseChatRequest(
      R"({"messages": [{"role": "user", "content": "a"}], "structured_outputs": {"regex": "\\d+"}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].sampling().structured_output().regex(), "\\d+");
  r = ParseCompletionRequest(R"({"prompt": "a", "guided_regex": "yes|no"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].sampling().structured_output().regex(), "yes|no");
  r = ParseCompletionRequest(
      R"({"prompt": "a", "structured_outputs": {"grammar": "root ::= \"y\" | \"n\""}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].sampling().structured_output().grammar(), R"(root ::= "y" | "n")");
  r = ParseCompletionRequest(R"({"prompt": "a", "guided_grammar": "root ::= [0-9]+"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].sampling().structured_output().grammar(), "root ::= [0-9]+");
}

TEST(OpenAiRequestTest, TokenizeTakesAPromptOrMessages) {
  absl::StatusOr<TokenizeHttpRequest> t = ParseTokenizeRequest(
      R"({"model": "m", "prompt": "Hello", "add_special_tokens": false, "return_token_strs": true})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->model, "m");
  EXPECT_EQ(t->request.text(), "Hello");
  EXPECT_FALSE(t->request.add_special_tokens());
  EXPECT_TRUE(t->return_token_strs);
  t = ParseTokenizeRequest(
      R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": false})");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->request.chat().messages_size(), 1);
  EXPECT_FALSE(t->request.chat().add_generation_prompt());
  for (const char* bad :
       {R"({"model": "m"})", R"({"prompt": "a", "messages": [{"role": "user", "content": "b"}]})",
        R"({"prompt": "a", "add_generation_prompt": true})",
        R"({"messages": [{"role": "user", "content": "b"}],
                              "add_special_tokens": true})",
        R"({"prompt": 3})", R"({"prompt": "a", "max_tokens": 3})"}) {
    EXPECT_EQ(ParseTokenizeRequest(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  absl::StatusOr<DetokenizeHttpRequest> d =
      ParseDetokenizeRequest(R"({"tokens": [1, 2, 3], "skip_special_tokens": true})");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->request.token_ids(), ElementsAre(1, 2, 3));
  EXPECT_TRUE(d->request.skip_special_tokens());
  for (const char* bad : {R"({})", R"({"tokens": "abc"})", R"({"tokens": [1.5]})",
                          R"({"tokens": [4294967296]})", R"({"tokens": [], "prompt": "x"})"}) {
    EXPECT_EQ(ParseDetokenizeRequest(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(OpenAiRequestTest, EmbeddingInputTakesEveryShapeAndBecomesEmbeddingRequests) {
  absl::StatusOr<OpenAiRequest> r = ParseEmbeddingRequest(
      R"({"model": "m", "input": ["a", "b c"], "encoding_format": "base64", "user": "u",
          "dimensions": null, "add_special_tokens": false, "priority": 3})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, OpenAiRequest::Kind::kEmbedding);
  EXPECT_EQ(r->model, "m");
  EXPECT_TRUE(r->base64);
  EXPECT_FALSE(r->stream);
  ASSERT_EQ(r->prompts.size(), 2u);
  EXPECT_EQ(r->prompts[1].text(), "b c");
  for (const v1::GenerateRequest& p : r->prompts) {
    EXPECT_TRUE(p.sampling().embed());
    EXPECT_EQ(p.sampling().max_tokens(), 1);
    EXPECT_EQ(p.sampling().priority(), 3);
    EXPECT_FALSE(p.add_special_tokens());
  }
  r = ParseEmbeddingRequest(R"({"input": [[1, 2], [3]], "encoding_format": "float"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->base64);
  ASSERT_EQ(r->prompts.size(), 2u);
  EXPECT_THAT(r->prompts[0].token_ids().ids(), ElementsAre(1, 2));
  r = ParseEmbeddingRequest(R"({"input": [5, 6, 7]})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->prompts.size(), 1u);
  EXPECT_THAT(r->prompts[0].token_ids().ids(), ElementsAre(5, 6, 7));
  EXPECT_FALSE(r->prompts[0].has_add_special_tokens());  // the API's default (true) applies
}

TEST(OpenAiRequestTest, EmbeddingRequestsRefuseWhatTheyCannotDo) {
  struct Case {
    const char* body;
    const char* param;
    const char* message;
  };
  std::string inputs = "\"a\"";
  for (int i = 0; i < kMaxEmbeddingInputs; ++i) inputs += ",\"a\"";
  const std::string over = "{\"input\": [" + inputs + "]}";
  for (const Case& c : std::vector<Case>{
           {R"({"model": "m"})", "input", "input is required"},
           {R"({"input": []})", "input", "input is an empty array"},
           {R"({"input": 5})", "input", "must be a string, an array of strings"},
           {R"({"input": ["a", [1]]})", "input[1]", "must be a string"},
           {R"({"input": "a", "encoding_format": "int8"})", "encoding_format",
            "\"float\" or \"base64\""},
           {R"({"input": "a", "dimensions": 64})", "dimensions", "matryoshka"},
           {R"({"input": "a", "max_tokens": 1})", "max_tokens", "unknown or unsupported field"},
           {R"({"input": "a", "stream": true})", "stream", "unknown or unsupported field"},
           {over.c_str(), "input", "the limit is 2048"},
       }) {
    SCOPED_TRACE(c.body);
    absl::StatusOr<OpenAiRequest> r = ParseEmbeddingRequest(c.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
    EXPECT_EQ(OpenAiParam(r.status()), c.param);
  }
}

TEST(OpenAiRequestTest, ScoreAndRerankEmbedEachTextOnceAndPairThem) {
  absl::StatusOr<ScoreHttpRequest> r =
      ParseScoreRequest(R"({"model": "m", "text_1": "q", "text_2": ["a", "b"]})", false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->embed.kind, OpenAiRequest::Kind::kEmbedding);
  EXPECT_EQ(r->embed.model, "m");
  ASSERT_EQ(r->embed.prompts.size(), 3u);  // q once
  EXPECT_EQ(r->embed.prompts[0].text(), "q");
  EXPECT_EQ(r->embed.prompts[2].text(), "b");
  for (const auto& p : r->embed.prompts) EXPECT_TRUE(p.sampling().embed());
  EXPECT_EQ(r->pairs, (std::vector<std::pair<int, int>>{{0, 1}, {0, 2}}));
  EXPECT_FALSE(r->rerank);

  r = ParseScoreRequest(R"({"text_1": ["q1", "q2"], "text_2": ["a", "b"], "priority": 2})", false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pairs, (std::vector<std::pair<int, int>>{{0, 2}, {1, 3}}));
  EXPECT_EQ(r->embed.prompts[0].sampling().priority(), 2);
  r = ParseScoreRequest(R"({"text_1": "q", "text_2": "a"})", false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pairs, (std::vector<std::pair<int, int>>{{0, 1}}));

  r = ParseScoreRequest(R"({"query": "q", "documents": ["a", "b", "c"], "top_n": 2})", true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->rerank);
  EXPECT_EQ(r->top_n, 2);
  EXPECT_THAT(r->documents, ElementsAre("a", "b", "c"));
  EXPECT_EQ(r->pairs, (std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {0, 3}}));
}

TEST(OpenAiRequestTest, ScoreAndRerankRefuseWhatTheyCannotPair) {
  struct Case {
    const char* body;
    bool rerank;
    const char* param;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"text_2": "a"})", false, "text_1", "text_1 is required"},
           {R"({"text_1": ["a", "b"], "text_2": ["c", "d", "e"]})", false, "text_2",
            "give one text_1, or as many as text_2"},
           {R"({"text_1": "a", "text_2": []})", false, "text_2", "empty array"},
           {R"({"text_1": "a", "text_2": [1]})", false, "text_2[0]", "must be a string"},
           {R"({"query": ["q"], "documents": ["a"]})", true, "query", "must be a string"},
           {R"({"query": "q", "documents": "a"})", true, "documents", "an array of strings"},
           {R"({"query": "q", "documents": ["a"], "top_n": -1})", true, "top_n", ">= 0"},
           {R"({"query": "q", "documents": ["a"], "text_1": "x"})", true, "text_1",
            "unknown or unsupported field"},
       }) {
    SCOPED_TRACE(c.body);
    absl::StatusOr<ScoreHttpRequest> r = ParseScoreRequest(c.body, c.rerank);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
    EXPECT_EQ(OpenAiParam(r.status()), c.param);
  }
  std::string docs = "\"a\"";
  for (int i = 0; i < kMaxEmbeddingInputs; ++i) docs += ",\"a\"";
  const absl::StatusOr<ScoreHttpRequest> r =
      ParseScoreRequest("{\"query\": \"q\", \"documents\": [" + docs + "]}", true);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("the limit is 2048"));
}

TEST(OpenAiRequestTest, LogitBiasAndAllowedTokenIds) {
  absl::StatusOr<OpenAiRequest> r = ParseCompletionRequest(
      R"({"prompt": "a", "logit_bias": {"50256": -100, "7": 2.5}, "allowed_token_ids": [7, 9]})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::SamplingParams& s = r->prompts[0].sampling();
  ASSERT_EQ(s.logit_bias_size(), 2);
  EXPECT_EQ(s.logit_bias().at(50256), -100.0f);
  EXPECT_EQ(s.logit_bias().at(7), 2.5f);
  EXPECT_THAT(s.allowed_token_ids(), ElementsAre(7, 9));
  r = ParseChatRequest(R"({"messages": [{"role": "user", "content": "a"}], "logit_bias": null})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts[0].sampling().logit_bias_size(), 0);
}

// A body nested deeper than kMaxJsonDepth.
const std::string* const kTooDeepBody =
    new std::string("{\"prompt\": " + std::string(kMaxJsonDepth, '[') + "1" +
                    std::string(kMaxJsonDepth, ']') + "}");
const char* const kTooDeep = kTooDeepBody->c_str();

struct BadCase {
  const char* name;
  bool chat;
  const char* body;
  const char* param;    // the error's param ("" for none)
  const char* message;  // a substring of the message
};

class OpenAiRequestErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(OpenAiRequestErrorTest, IsRefusedNamingTheField) {
  const BadCase& c = GetParam();
  absl::StatusOr<OpenAiRequest> r =
      c.chat ? ParseChatRequest(c.body) : ParseCompletionRequest(c.body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  EXPECT_EQ(OpenAiParam(r.status()), c.param);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, OpenAiRequestErrorTest,
    ::testing::Values(
        BadCase{"NotJson", false, "{\"prompt\": ", "", "not valid JSON"},
        BadCase{"NotAnObject", false, "[1]", "", "must be a JSON object"},
        BadCase{"DuplicateKey", false, R"({"prompt": "a", "prompt": "b"})", "", "duplicate key"},
        BadCase{"TooDeep", false, kTooDeep, "", "deeper"},
        BadCase{"NoPrompt", false, R"({"max_tokens": 1})", "prompt", "prompt is required"},
        BadCase{"EmptyPromptList", false, R"({"prompt": []})", "prompt", "empty array"},
        BadCase{"MixedPrompts", false, R"({"prompt": ["a", 1]})", "prompt[1]", "must be a string"},
        BadCase{"FloatTokenId", false, R"({"prompt": [1, 2.5]})", "prompt[1]", "token id"},
        BadCase{"WrongType", false, R"({"prompt": "a", "max_tokens": "16"})", "max_tokens",
                "max_tokens must be an integer, got a string"},
        BadCase{"FractionalInt", false, R"({"prompt": "a", "n": 1.5})", "n", "an integer"},
        BadCase{"BoolAsNumber", false, R"({"prompt": "a", "temperature": true})", "temperature",
                "must be a number"},
        BadCase{"IntOverflow", false, R"({"prompt": "a", "max_tokens": 99999999999})", "max_tokens",
                "out of range"},
        BadCase{"NZero", false, R"({"prompt": "a", "n": 0})", "n", "at least 1"},
        BadCase{"UnknownField", false, R"({"prompt": "a", "temprature": 1})", "temprature",
                "unknown or unsupported field 'temprature'"},
        BadCase{"Suffix", false, R"({"prompt": "a", "suffix": "z"})", "suffix", "not supported"},
        BadCase{"LogitBiasKey", false, R"({"prompt": "a", "logit_bias": {"x": 5}})", "logit_bias",
                "maps token ids"},
        BadCase{"LogitBiasValue", false, R"({"prompt": "a", "logit_bias": {"1": "5"}})",
                "logit_bias", "maps token ids"},
        BadCase{"AllowedTokenIds", false, R"({"prompt": "a", "allowed_token_ids": [1, -2]})",
                "allowed_token_ids", "list of token ids"},
        BadCase{"UseBeamSearchNotABool", false, R"({"prompt": "a", "use_beam_search": 1})",
                "use_beam_search", "must be a boolean"},
        BadCase{"LengthPenaltyNotANumber", false,
                R"({"prompt": "a", "use_beam_search": true, "length_penalty": "x"})",
                "length_penalty", "must be a number"},
        BadCase{"EmptyCacheSalt", false, R"({"prompt": "a", "cache_salt": ""})", "cache_salt",
                "non-empty string"},
        BadCase{"CacheSaltNotAString", true,
                R"({"messages": [{"role": "user", "content": "a"}], "cache_salt": 7})",
                "cache_salt", "must be a string"},
        BadCase{"TruncationSide", false, R"({"prompt": "a", "truncation_side": "middle"})",
                "truncation_side", "either 'left' or 'right'"},
        BadCase{"TruncateWithEcho", false,
                R"({"prompt": "a", "truncate_prompt_tokens": 2, "echo": true})",
                "truncate_prompt_tokens", "not supported with echo"},
        BadCase{"BestOf", false, R"({"prompt": "a", "best_of": 3})", "best_of", "not supported"},
        BadCase{"PromptLogprobsStreamed", false,
                R"({"prompt": "a", "stream": true, "prompt_logprobs": 1})", "prompt_logprobs",
                "not available when stream"},
        BadCase{"PromptLogprobsTooMany", true,
                R"({"messages": [{"role": "user", "content": "a"}], "prompt_logprobs": 21})",
                "prompt_logprobs", "[0, 20]"},
        BadCase{"PromptLogprobsNegative", false, R"({"prompt": "a", "prompt_logprobs": -1})",
                "prompt_logprobs", "[0, 20]"},
        BadCase{"StreamOptionsWithoutStream", false,
                R"({"prompt": "a", "stream_options": {"include_usage": true}})", "stream_options",
                "only allowed when stream is true"},
        BadCase{"StopWrongType", false, R"({"prompt": "a", "stop": 3})", "stop",
                "a string or an array of strings"},
        BadCase{"TooManyPrompts", false,
                "{\"prompt\": [\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
                "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
                "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
                "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
                "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
                "\"a\",\"a\"]}",
                "prompt", "the limit is 64"},
        BadCase{"ModelNotString", false, R"({"prompt": "a", "model": 5})", "model",
                "model must be a string"},
        BadCase{"NoMessages", true, R"({"model": "m"})", "messages", "messages is required"},
        BadCase{"TemplateKwargsNotObject", true,
                R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": [1]})",
                "chat_template_kwargs", "an object"},
        BadCase{"EmptyMessages", true, R"({"messages": []})", "messages", "messages is empty"},
        BadCase{"MessageNotObject", true, R"({"messages": ["hi"]})", "messages[0]", "an object"},
        BadCase{"NoRole", true, R"({"messages": [{"content": "hi"}]})", "messages[0].role",
                "must be a string"},
        BadCase{
            "ImagePart", true,
            R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
            "messages[0].content[0].type", "'image_url' is not supported"},
        BadCase{"ToolCallWithoutFunction", true,
                R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "1"}]}]})",
                "messages[0].tool_calls[0].function", "is required"},
        BadCase{
            "ToolCallWithoutId", true,
            R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]}]})",
            "messages[0].tool_calls[0].id", "is required"},
        BadCase{
            "ToolCallArgumentsNotText", true,
            R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": 5}}]}]})",
            "messages[0].tool_calls[0].function.arguments", "JSON text"},
        BadCase{"MessageFunctionCall", true,
                R"({"messages": [{"role": "assistant", "function_call": {"name": "f"}}]})",
                "messages[0].function_call", "deprecated"},
        BadCase{"MessageNameNotString", true,
                R"({"messages": [{"role": "user", "content": "a", "name": 7}]})",
                "messages[0].name", "must be a string"},
        BadCase{
            "ToolWithoutFunction", true,
            R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function"}]})",
            "tools[0].function", "is required"},
        BadCase{
            "ToolOfOtherType", true,
            R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "retrieval", "function": {"name": "f"}}]})",
            "tools[0].type", "must be \"function\""},
        BadCase{
            "ToolParametersNotObject", true,
            R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"function": {"name": "f", "parameters": []}}]})",
            "tools[0].function.parameters", "an object"},
        BadCase{"Functions", true,
                R"({"messages": [{"role": "user", "content": "a"}], "functions": [{"name": "f"}]})",
                "functions", "deprecated"},
        BadCase{"ToolChoiceWithoutTools", true,
                R"({"messages": [{"role": "user", "content": "a"}], "tool_choice": "auto"})",
                "tool_choice", "When using `tool_choice`, `tools` must be set."},
        BadCase{
            "ToolChoiceUnknown", true,
            R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"function": {"name": "f"}}], "tool_choice": "always"})",
            "tool_choice", "Invalid value for `tool_choice`: always!"},
        BadCase{
            "ToolChoiceWithoutName", true,
            R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {}}})",
            "tool_choice.function.name", "Expected field `name`"},
        BadCase{
            "ToolChoiceOfNoTool", true,
            R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}})",
            "tool_choice", "does not match any of the specified `tools`"},
        BadCase{
            "ToolChoiceAndResponseFormat", true,
            R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"function": {"name": "f"}}], "tool_choice": "required", "response_format": {"type": "json_object"}})",
            "tool_choice", "structured output of its own"},
        BadCase{
            "ToolDefsConflict", true,
            R"({"messages": [{"role": "user", "content": "a"}], "tool_choice": "required", "tools": [{"function": {"name": "f", "parameters": {"$defs": {"A": {"type": "string"}}}}}, {"function": {"name": "g", "parameters": {"$defs": {"A": {"type": "integer"}}}}}]})",
            "tools[1].function.parameters", "Tool definition 'A' has multiple schemas"},
        BadCase{
            "JsonSchemaWithoutSchema", true,
            R"({"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})",
            "response_format", "needs json_schema.schema"},
        BadCase{"UnknownResponseFormat", false,
                R"({"prompt": "a", "response_format": {"type": "yaml"}})", "response_format",
                "text, json_object or json_schema"},
        BadCase{"GuidedRegexNotAString", false, R"({"prompt": "a", "guided_regex": ["a+"]})",
                "guided_regex", "must be a string"},
        BadCase{"GuidedGrammarNotAString", false, R"({"prompt": "a", "guided_grammar": 1})",
                "guided_grammar", "must be a string"},
        BadCase{"WhitespacePattern", false, R"({"prompt": "a", "guided_whitespace_pattern": " *"})",
                "guided_whitespace_pattern", "not supported"},
        BadCase{"RegexAndChoice", false,
                R"({"prompt": "a", "structured_outputs": {"regex": "a+", "choice": ["a"]}})",
                "structured_outputs.choice", "only one structured output constraint"},
        BadCase{"StructuredOutputsStructuralTag", false,
                R"({"prompt": "a", "structured_outputs": {"structural_tag": "{}"}})",
                "structured_outputs", "structured_outputs.structural_tag is not supported"},
        BadCase{
            "TwoConstraints", false,
            R"({"prompt": "a", "guided_choice": ["a"], "response_format": {"type": "json_object"}})",
            "guided_choice", "only one structured output constraint"},
        BadCase{
            "ChoiceNotStrings", true,
            R"({"messages": [{"role": "user", "content": "a"}], "structured_outputs": {"choice": [1]}})",
            "structured_outputs.choice", "list of strings"},
        BadCase{"SchemaNotAnObject", false, R"({"prompt": "a", "guided_json": 3})", "guided_json",
                "JSON Schema object"},
        BadCase{"TopLogprobsWithoutLogprobs", true,
                R"({"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2})",
                "top_logprobs", "needs logprobs"},
        BadCase{"ChatUnknownField", true,
                R"({"messages": [{"role": "user", "content": "a"}], "prompt": "x"})", "prompt",
                "unknown or unsupported field"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pagellm
