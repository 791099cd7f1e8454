// OpenAiResponse's prompt logprobs: the legacy completions API's echo with logprobs (the prompt's
// tokens lead each choice's logprobs, as vLLM and lm-evaluation-harness expect), echo with
// max_tokens 0, and vLLM's prompt_logprobs field. The worker's messages are written by hand;
// the vocabulary is the fake worker's byte-level one (token b is byte b).
#include "router/http/openai_response.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "router/testing/fake_worker.h"

namespace pagellm {
namespace {

using Json = nlohmann::json;

constexpr int32_t kH = 'h', kI = 'i', kA = 'a', kB = 'b';

v1::TokenLogprob Logprob(int32_t id, float logprob, int32_t rank,
                         std::vector<std::pair<int32_t, float>> top) {
  v1::TokenLogprob t;
  t.set_token_id(id);
  t.set_logprob(logprob);
  t.set_rank(rank);
  for (auto [tid, lp] : top) {
    v1::TopLogprob* alt = t.add_top();
    alt->set_token_id(tid);
    alt->set_logprob(lp);
  }
  return t;
}

// What a worker streams for prompt "hi" with prompt_logprobs 1, then the token "a" with
// logprobs 1, then the end: prompt ids and prompt logprobs first, as generation.proto says.
std::vector<v1::GenerateResponse> WorkerMessages() {
  std::vector<v1::GenerateResponse> m(3);
  m[0].add_prompt_token_ids(kH);
  m[0].add_prompt_token_ids(kI);
  *m[0].add_prompt_logprobs() = Logprob(kI, -1.5f, 3, {{kA, -0.5f}});
  v1::SampleDelta* d = m[1].add_deltas();
  d->set_text("a");
  d->add_token_ids(kA);
  *d->add_logprobs() = Logprob(kA, -0.25f, 1, {{kA, -0.25f}});
  d->set_finish_reason(v1::FINISH_REASON_LENGTH);
  m[2].set_finished(true);
  m[2].mutable_usage()->set_prompt_tokens(2);
  m[2].mutable_usage()->set_completion_tokens(1);
  return m;
}

class OpenAiResponseTest : public ::testing::Test {
 protected:
  OpenAiResponse::Config EchoLogprobs() const {
    OpenAiResponse::Config c;
    c.id = "cmpl-1";
    c.model = "m";
    c.logprobs = 1;
    c.echo = {"hi"};
    c.echo_logprobs = true;
    return c;
  }
  Json Body(const OpenAiResponse::Config& config) {
    OpenAiResponse r(config, tokenizer_.get());
    for (const v1::GenerateResponse& m : WorkerMessages()) r.Append(0, m, nullptr);
    return Json::parse(r.Body());
  }

  std::unique_ptr<Tokenizer> tokenizer_ = testing::FakeWorker::TinyTokenizer();
};

TEST_F(OpenAiResponseTest, EchoWithLogprobsListsThePromptTokensFirst) {
  const Json c = Body(EchoLogprobs())["choices"][0];
  EXPECT_EQ(c["text"], "hia");
  const Json& lp = c["logprobs"];
  EXPECT_EQ(lp["tokens"], Json({"h", "i", "a"}));
  EXPECT_EQ(lp["text_offset"], Json({0, 1, 2}));
  ASSERT_EQ(lp["token_logprobs"].size(), 3u);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null()) << "the first prompt token has no logprob";
  EXPECT_EQ(lp["token_logprobs"][1], -1.5);
  EXPECT_EQ(lp["token_logprobs"][2], -0.25);
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["top_logprobs"][1], Json({{"a", -0.5}, {"i", -1.5}}));
  EXPECT_EQ(lp["top_logprobs"][2], Json({{"a", -0.25}}));
  EXPECT_FALSE(c.contains("prompt_logprobs")) << "only when asked for by that name";
}

TEST_F(OpenAiResponseTest, EchoWithMaxTokensZeroReturnsThePromptAlone) {
  OpenAiResponse::Config config = EchoLogprobs();
  config.echo_only = true;
  const Json j = Body(config);
  const Json& c = j["choices"][0];
  EXPECT_EQ(c["text"], "hi");
  EXPECT_EQ(c["logprobs"]["tokens"], Json({"h", "i"}));
  EXPECT_EQ(c["logprobs"]["token_logprobs"][1], -1.5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 0) << "the dropped token is not counted";
  EXPECT_EQ(j["usage"]["prompt_tokens"], 2);
}

TEST_F(OpenAiResponseTest, StreamedEchoPutsThePromptInTheFirstChunk) {
  OpenAiResponse::Config config = EchoLogprobs();
  config.n = 2;
  OpenAiResponse r(config, tokenizer_.get());
  std::string out;
  std::vector<v1::GenerateResponse> m = WorkerMessages();
  v1::SampleDelta second = m[1].deltas(0);
  second.set_sample_index(1);
  *m[1].add_deltas() = second;
  for (const v1::GenerateResponse& msg : m) r.Append(0, msg, &out);
  std::vector<Json> chunks;
  for (absl::string_view line : absl::StrSplit(out, "\n\n", absl::SkipEmpty())) {
    ASSERT_TRUE(absl::ConsumePrefix(&line, "data: "));
    chunks.push_back(Json::parse(line));
  }
  ASSERT_EQ(chunks.size(), 2u) << out;  // one per choice: echo, its token and its end at once
  for (int i = 0; i < 2; ++i) {
    const Json& c = chunks[i]["choices"][0];
    EXPECT_EQ(c["index"], i);
    EXPECT_EQ(c["text"], "hia");
    EXPECT_EQ(c["logprobs"]["tokens"], Json({"h", "i", "a"}));
    EXPECT_EQ(c["logprobs"]["text_offset"], Json({0, 1, 2}));
    EXPECT_TRUE(c["logprobs"]["token_logprobs"][0].is_null());
  }
}

TEST_F(OpenAiResponseTest, VllmPromptLogprobsFieldOnTheChoiceOrTheChatResponse) {
  // vLLM's shape: null, then {"<id>": {logprob, rank, decoded_token}} for the prompt token and
  // the N best.
  const Json expected =
      Json::array({nullptr,
                   {{"105", {{"logprob", -1.5}, {"rank", 3}, {"decoded_token", "i"}}},
                    {"97", {{"logprob", -0.5}, {"rank", 1}, {"decoded_token", "a"}}}}});
  OpenAiResponse::Config config;
  config.prompt_logprobs = 1;
  Json j = Body(config);
  EXPECT_EQ(j["choices"][0]["prompt_logprobs"], expected);
  EXPECT_EQ(j["choices"][0]["text"], "a");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());

  config.kind = OpenAiRequest::Kind::kChat;
  j = Body(config);
  EXPECT_EQ(j["prompt_logprobs"], expected);
  EXPECT_FALSE(j["choices"][0].contains("prompt_logprobs"));
}

// vLLM's return_token_ids: the generated ids on each choice, the prompt's on the completion
// choice or the chat response; streamed, each chunk's new ids and the prompt's in the first.
TEST_F(OpenAiResponseTest, ReturnTokenIdsOnTheChoiceOrTheChatResponseAndStreamedAsDeltas) {
  std::vector<v1::GenerateResponse> m(3);
  m[0].add_prompt_token_ids(kH);
  m[0].add_prompt_token_ids(kI);
  v1::SampleDelta* d = m[0].add_deltas();
  d->set_text("a");
  d->add_token_ids(kA);
  d = m[1].add_deltas();
  d->set_text("b");
  d->add_token_ids(kB);
  d->set_finish_reason(v1::FINISH_REASON_LENGTH);
  m[2].set_finished(true);
  auto run = [&](OpenAiRequest::Kind kind, bool stream, bool asked) {
    OpenAiResponse::Config config;
    config.kind = kind;
    config.return_token_ids = asked;
    OpenAiResponse r(config, tokenizer_.get());
    std::string out;
    for (const v1::GenerateResponse& msg : m) r.Append(0, msg, stream ? &out : nullptr);
    std::vector<Json> chunks;
    if (!stream) return std::vector<Json>{Json::parse(r.Body())};
    for (absl::string_view line : absl::StrSplit(out, "\n\n", absl::SkipEmpty())) {
      EXPECT_TRUE(absl::ConsumePrefix(&line, "data: "));
      chunks.push_back(Json::parse(line));
    }
    return chunks;
  };
  using Kind = OpenAiRequest::Kind;
  const Json prompt = Json::array({kH, kI});
  Json j = run(Kind::kCompletion, false, true)[0];
  EXPECT_EQ(j["choices"][0]["token_ids"], Json::array({kA, kB}));
  EXPECT_EQ(j["choices"][0]["prompt_token_ids"], prompt);
  j = run(Kind::kChat, false, true)[0];
  EXPECT_EQ(j["choices"][0]["token_ids"], Json::array({kA, kB}));
  EXPECT_EQ(j["prompt_token_ids"], prompt);
  EXPECT_FALSE(j["choices"][0].contains("prompt_token_ids"));
  j = run(Kind::kCompletion, false, false)[0];
  EXPECT_FALSE(j["choices"][0].contains("token_ids"));
  EXPECT_FALSE(j["choices"][0].contains("prompt_token_ids"));

  std::vector<Json> chunks = run(Kind::kCompletion, true, true);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]["choices"][0]["token_ids"], Json::array({kA}));
  EXPECT_EQ(chunks[0]["choices"][0]["prompt_token_ids"], prompt);
  EXPECT_EQ(chunks[1]["choices"][0]["token_ids"], Json::array({kB}));
  EXPECT_FALSE(chunks[1]["choices"][0].contains("prompt_token_ids"));
  chunks = run(Kind::kChat, true, true);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]["prompt_token_ids"], prompt);
  EXPECT_EQ(chunks[0]["choices"][0]["token_ids"], Json::array({kA}));
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["content"], "a");
  EXPECT_FALSE(chunks[1].contains("prompt_token_ids"));
  EXPECT_EQ(chunks[1]["choices"][0]["token_ids"], Json::array({kB}));
  chunks = run(Kind::kChat, true, false);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_FALSE(chunks[0].contains("prompt_token_ids"));
  EXPECT_FALSE(chunks[0]["choices"][0].contains("token_ids"));
}

TEST_F(OpenAiResponseTest, ResetForgetsThePromptToo) {
  OpenAiResponse r(EchoLogprobs(), tokenizer_.get());
  std::vector<v1::GenerateResponse> m = WorkerMessages();
  r.Append(0, m[0], nullptr);  // the worker dies after its prompt logprobs
  r.Reset(0);
  for (const v1::GenerateResponse& msg : m) r.Append(0, msg, nullptr);  // the retry
  const Json lp = Json::parse(r.Body())["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json({"h", "i", "a"})) << "not listed twice";
}

}  // namespace
}  // namespace pagellm
