// OpenAiResponse with tool calls and reasoning: how a chat reply becomes `tool_calls` under each
// tool_choice and `reasoning` under a reasoning format, whole and streamed (the chunks the openai
// SDK accumulates). The worker's messages are written
// by hand; tool call ids are injected.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "router/http/openai_response.h"
#include "router/testing/fake_worker.h"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;

// The worker's messages for a reply streamed as `pieces`, finished with `finish`.
std::vector<v1::GenerateResponse> Reply(const std::vector<std::string>& pieces,
                                        v1::FinishReason finish = v1::FINISH_REASON_STOP) {
  std::vector<v1::GenerateResponse> m(pieces.size() + 1);
  for (size_t i = 0; i < pieces.size(); ++i) {
    v1::SampleDelta* d = m[i].add_deltas();
    d->set_text(pieces[i]);
    if (i + 1 == pieces.size()) d->set_finish_reason(finish);
  }
  m.back().set_finished(true);
  m.back().mutable_usage()->set_prompt_tokens(3);
  m.back().mutable_usage()->set_completion_tokens(static_cast<int>(pieces.size()));
  return m;
}

class OpenAiResponseToolsTest : public ::testing::Test {
 protected:
  OpenAiResponse::Config Config(ToolChoice::Mode mode, std::string name = "") {
    OpenAiResponse::Config c;
    c.kind = OpenAiRequest::Kind::kChat;
    c.id = "chatcmpl-1";
    c.model = "m";
    c.tool_choice.mode = mode;
    c.tool_choice.name = std::move(name);
    c.tool_call_id = [n = std::make_shared<int>(0)] { return "call_" + std::to_string((*n)++); };
    return c;
  }
  // The non-streamed choice 0.
  Json Message(const OpenAiResponse::Config& config, const std::vector<std::string>& pieces,
               v1::FinishReason finish = v1::FINISH_REASON_STOP) {
    OpenAiResponse r(config, tokenizer_.get());
    for (const v1::GenerateResponse& m : Reply(pieces, finish)) r.Append(0, m, nullptr);
    return Json::parse(r.Body())["choices"][0];
  }
  // The streamed chunks' choice objects, the role chunk first.
  std::vector<Json> Chunks(const OpenAiResponse::Config& config,
                           const std::vector<std::string>& pieces,
                           v1::FinishReason finish = v1::FINISH_REASON_STOP) {
    OpenAiResponse r(config, tokenizer_.get());
    std::string sse;
    r.AppendStart(&sse);
    for (const v1::GenerateResponse& m : Reply(pieces, finish)) r.Append(0, m, &sse);
    r.AppendEnd(&sse);
    std::vector<Json> out;
    for (absl::string_view event : absl::StrSplit(sse, "\n\n", absl::SkipEmpty())) {
      EXPECT_TRUE(absl::ConsumePrefix(&event, "data: "));
      if (event == "[DONE]") break;
      out.push_back(Json::parse(event)["choices"][0]);
    }
    return out;
  }

  std::unique_ptr<Tokenizer> tokenizer_ = testing::FakeWorker::TinyTokenizer();
};

TEST_F(OpenAiResponseToolsTest, NamedChoiceTheReplyIsTheArguments) {
  Json c = Message(Config(ToolChoice::Mode::kNamed, "get_weather"), {"{\"city\": ", "\"Oslo\"}"});
  EXPECT_EQ(c["message"], Json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_0", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]})"));
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  // Cut short, the call is still returned, and the reason says so.
  c = Message(Config(ToolChoice::Mode::kNamed, "f"), {"{\"a\": "}, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["arguments"], "{\"a\": ");
  EXPECT_EQ(c["finish_reason"], "length");
}

TEST_F(OpenAiResponseToolsTest, NamedChoiceStreamsTheArgumentsAsTheyCome) {
  std::vector<Json> chunks =
      Chunks(Config(ToolChoice::Mode::kNamed, "get_weather"), {"{\"city\": ", "\"Oslo\"}"});
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0]["delta"], Json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_EQ(chunks[1]["delta"], Json::parse(R"({"tool_calls": [{"index": 0, "id": "call_0",
      "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": "}}]})"));
  EXPECT_TRUE(chunks[1]["finish_reason"].is_null());
  EXPECT_EQ(
      chunks[2]["delta"],
      Json::parse(R"({"tool_calls": [{"index": 0, "function": {"arguments": "\"Oslo\"}"}}]})"));
  EXPECT_EQ(chunks[2]["finish_reason"], "tool_calls");
}

TEST_F(OpenAiResponseToolsTest, RequiredChoiceReadsTheListOfCalls) {
  const std::vector<std::string> pieces = {
      R"([{"name": "get_weather", "parameters": {"city": "Oslo"}}, )",
      R"({"name": "get_time", "parameters": {}}])"};
  Json c = Message(Config(ToolChoice::Mode::kRequired), pieces);
  EXPECT_EQ(c["message"], Json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_0", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
      {"id": "call_1", "type": "function",
       "function": {"name": "get_time", "arguments": "{}"}}]})"));
  EXPECT_EQ(c["finish_reason"], "tool_calls");

  std::vector<Json> chunks = Chunks(Config(ToolChoice::Mode::kRequired), pieces);
  ASSERT_EQ(chunks.size(), 3u);  // role, then one chunk per call as its element closes
  EXPECT_EQ(chunks[1]["delta"]["tool_calls"][0]["index"], 0);
  EXPECT_EQ(chunks[1]["delta"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(chunks[2]["delta"]["tool_calls"][0]["index"], 1);
  EXPECT_EQ(chunks[2]["delta"]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(chunks[2]["finish_reason"], "tool_calls");

  // parallel_tool_calls false keeps the first call.
  OpenAiResponse::Config one = Config(ToolChoice::Mode::kRequired);
  one.tool_choice.parallel_tool_calls = false;
  EXPECT_EQ(Message(one, pieces)["message"]["tool_calls"].size(), 1u);
}

TEST_F(OpenAiResponseToolsTest, RequiredCallsStreamAsTheirElementsClose) {
  // The first call is out before the second is generated.
  OpenAiResponse r(Config(ToolChoice::Mode::kRequired), tokenizer_.get());
  std::string sse;
  std::vector<v1::GenerateResponse> m = Reply(
      {R"([{"name": "f", "parameters": {"s": "],}"}})", R"(, {"name": "g", "parameters": {}}])"});
  r.Append(0, m[0], &sse);
  EXPECT_NE(sse.find(R"("arguments":"{\"s\": \"],}\"}")"), std::string::npos) << sse;
  EXPECT_EQ(sse.find(R"("name":"g")"), std::string::npos) << sse;
  r.Append(0, m[1], &sse);
  EXPECT_NE(sse.find(R"("name":"g")"), std::string::npos) << sse;
  // Cut short after a call: the call stays, the reason says so.
  std::vector<Json> chunks =
      Chunks(Config(ToolChoice::Mode::kRequired), {R"([{"name": "f", "parameters": {}}, {"na)"},
             v1::FINISH_REASON_LENGTH);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1]["delta"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(chunks[1]["finish_reason"], "length");
}

TEST_F(OpenAiResponseToolsTest, RequiredReplyCutShortIsContent) {
  Json c = Message(Config(ToolChoice::Mode::kRequired), {R"([{"name": "f", "para)"},
                   v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(c["message"],
            Json::parse(R"({"role": "assistant", "content": "[{\"name\": \"f\", \"para"})"));
  EXPECT_EQ(c["finish_reason"], "length");
}

TEST_F(OpenAiResponseToolsTest, AutoChoiceReadsHermesBlocks) {
  const std::vector<std::string> pieces = {"Let me check.", "\n<tool", "_call>\n{\"name\": \"f\", ",
                                           "\"arguments\": {\"x\": 1}}\n</tool_call>"};
  Json c = Message(Config(ToolChoice::Mode::kAuto), pieces);
  EXPECT_EQ(c["message"], Json::parse(R"({"role": "assistant", "content": "Let me check.\n",
      "tool_calls": [{"id": "call_0", "type": "function",
                      "function": {"name": "f", "arguments": "{\"x\": 1}"}}]})"));
  EXPECT_EQ(c["finish_reason"], "tool_calls");

  std::vector<Json> chunks = Chunks(Config(ToolChoice::Mode::kAuto), pieces);
  std::string content;
  std::vector<Json> calls;
  for (size_t i = 1; i < chunks.size(); ++i) {
    const Json& d = chunks[i]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("tool_calls")) calls.push_back(d["tool_calls"][0]);
  }
  EXPECT_EQ(content, "Let me check.\n");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], Json::parse(R"({"index": 0, "id": "call_0", "type": "function",
                                      "function": {"name": "f", "arguments": "{\"x\": 1}"}})"));
  EXPECT_EQ(chunks.back()["finish_reason"], "tool_calls");
}

TEST_F(OpenAiResponseToolsTest, AutoChoiceWithoutBlocksIsText) {
  Json c = Message(Config(ToolChoice::Mode::kAuto), {"No tools ", "needed."});
  EXPECT_EQ(c["message"], Json::parse(R"({"role": "assistant", "content": "No tools needed."})"));
  EXPECT_EQ(c["finish_reason"], "stop");
  std::vector<Json> chunks = Chunks(Config(ToolChoice::Mode::kAuto), {"No tools ", "needed."});
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[1]["delta"]["content"], "No tools ");
  EXPECT_EQ(chunks[2]["delta"]["content"], "needed.");
  EXPECT_EQ(chunks[2]["finish_reason"], "stop");
}

TEST_F(OpenAiResponseToolsTest, AutoChoiceReadsLlama3JsonCalls) {
  OpenAiResponse::Config config = Config(ToolChoice::Mode::kAuto);
  config.tool_format = ToolCallFormat::kLlama3Json;
  const std::vector<std::string> pieces = {"{\"name\": \"f\", ", "\"parameters\": {\"x\": 1}}"};
  Json c = Message(config, pieces);
  EXPECT_EQ(c["message"], Json::parse(R"({"role": "assistant", "content": null,
      "tool_calls": [{"id": "call_0", "type": "function",
                      "function": {"name": "f", "arguments": "{\"x\": 1}"}}]})"));
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  std::vector<Json> chunks = Chunks(config, pieces);
  ASSERT_EQ(chunks.size(), 2u);  // role; the call, with the finish reason, at the end
  EXPECT_EQ(chunks[1]["delta"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(chunks[1]["finish_reason"], "tool_calls");
  // Text streams as it comes.
  chunks = Chunks(config, {"Hello", " there"});
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[1]["delta"]["content"], "Hello");
  EXPECT_EQ(chunks[2]["finish_reason"], "stop");
}

TEST_F(OpenAiResponseToolsTest, ReasoningIsSplitFromTheAnswer) {
  OpenAiResponse::Config config = Config(ToolChoice::Mode::kNone);
  config.reasoning = true;
  const std::vector<std::string> pieces = {"2+2: add", " them.</th", "ink>\n\n4"};
  Json c = Message(config, pieces);
  EXPECT_EQ(c["message"], Json::parse(R"({"role": "assistant", "content": "\n\n4",
      "reasoning": "2+2: add them.", "reasoning_content": "2+2: add them."})"));
  EXPECT_EQ(c["finish_reason"], "stop");

  std::string reasoning, content;
  std::vector<Json> chunks = Chunks(config, pieces);
  for (size_t i = 1; i < chunks.size(); ++i) {
    const Json& d = chunks[i]["delta"];
    if (d.contains("reasoning")) {
      EXPECT_EQ(d["reasoning"], d["reasoning_content"]);
      reasoning += d["reasoning"].get<std::string>();
    }
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "2+2: add them.");
  EXPECT_EQ(content, "\n\n4");
  EXPECT_EQ(chunks.back()["finish_reason"], "stop");

  // Cut short while thinking: no answer.
  c = Message(config, {"hmm"}, v1::FINISH_REASON_LENGTH);
  EXPECT_TRUE(c["message"]["content"].is_null());
  EXPECT_EQ(c["message"]["reasoning"], "hmm");
}

TEST_F(OpenAiResponseToolsTest, CallsAreReadFromTheAnswerAfterTheReasoning) {
  OpenAiResponse::Config config = Config(ToolChoice::Mode::kAuto);
  config.reasoning = true;
  const std::vector<std::string> pieces = {
      "<think>The user wants <tool_call> weather.</think>\n",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"};
  Json c = Message(config, pieces);
  EXPECT_EQ(c["message"], Json::parse(R"({"role": "assistant", "content": "\n",
      "reasoning": "The user wants <tool_call> weather.",
      "reasoning_content": "The user wants <tool_call> weather.",
      "tool_calls": [{"id": "call_0", "type": "function",
                      "function": {"name": "f", "arguments": "{}"}}]})"));
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  std::vector<Json> chunks = Chunks(config, pieces);
  int calls = 0;
  for (const Json& chunk : chunks) calls += chunk["delta"].contains("tool_calls") ? 1 : 0;
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(chunks.back()["finish_reason"], "tool_calls");
}

}  // namespace
}  // namespace pagellm
