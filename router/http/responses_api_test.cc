#include "router/http/responses_api.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::HasSubstr;

std::vector<std::pair<std::string, std::string>> Messages(const ResponsesRequest& r) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& m : r.chat.prompts.at(0).chat().messages())
    out.emplace_back(m.role(), m.content());
  return out;
}

TEST(ResponsesRequestTest, IsTheChatRequestItAmountsTo) {
  absl::StatusOr<ResponsesRequest> r = ParseResponsesRequest(R"({
      "model": "m", "instructions": "Be brief.", "input": "Hi", "max_output_tokens": 7,
      "temperature": 0.5, "top_p": 0.9, "stream": true, "seed": 3,
      "metadata": {"team": "a"}, "store": true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->chat.kind, OpenAiRequest::Kind::kChat);
  EXPECT_EQ(r->chat.model, "m");
  EXPECT_TRUE(r->chat.stream);
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(Messages(*r), (std::vector<P>{{"system", "Be brief."}, {"user", "Hi"}}));
  const v1::SamplingParams& s = r->chat.prompts.at(0).sampling();
  EXPECT_EQ(s.max_tokens(), 7);
  EXPECT_FLOAT_EQ(s.temperature(), 0.5f);
  EXPECT_FLOAT_EQ(s.top_p(), 0.9f);
  EXPECT_EQ(s.seed(), 3);
  EXPECT_EQ(r->instructions, "Be brief.");
  EXPECT_EQ(r->max_output_tokens, 7);
  EXPECT_EQ(r->metadata, Json({{"team", "a"}}));

  // A conversation: developer is the system role; text parts are joined by newlines (as chat
  // joins them, as vLLM does).
  r = ParseResponsesRequest(R"({"input": [
      {"role": "developer", "content": "Rules."},
      {"type": "message", "role": "user",
       "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
      {"role": "assistant", "content": [{"type": "output_text", "text": "c", "annotations": []}]},
      {"role": "user", "content": "d"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(
      Messages(*r),
      (std::vector<P>{{"system", "Rules."}, {"user", "a\nb"}, {"assistant", "c"}, {"user", "d"}}));

  // text.format as chat's response_format.
  r = ParseResponsesRequest(R"({"input": "x", "text": {"format": {"type": "json_schema",
      "name": "n", "schema": {"type": "object"}, "strict": true}}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->chat.prompts.at(0).sampling().has_structured_output());
  EXPECT_EQ(r->text_format["name"], "n");
}

// Function tools as chat's, and a conversation's calls and their outputs as chat messages.
TEST(ResponsesRequestTest, FunctionToolsAndCallItemsAreChatsToolsAndToolMessages) {
  absl::StatusOr<ResponsesRequest> r = ParseResponsesRequest(R"({
      "input": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"type": "function_call", "call_id": "c1", "name": "weather",
         "arguments": "{\"city\": \"Paris\"}"},
        {"type": "function_call", "call_id": "c2", "name": "weather",
         "arguments": "{\"city\": \"Rome\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "c2", "output": "rain"}],
      "tools": [{"type": "function", "name": "weather", "description": "d",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
      "tool_choice": {"type": "function", "name": "weather"}})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ChatPrompt& chat = r->chat.prompts.at(0).chat();
  ASSERT_EQ(chat.tools_size(), 1);
  EXPECT_EQ(chat.tools(0).name(), "weather");
  EXPECT_EQ(r->chat.tool_choice.mode, ToolChoice::Mode::kNamed);
  EXPECT_EQ(r->chat.tool_choice.name, "weather");
  ASSERT_EQ(chat.messages_size(), 4) << "the two calls are one assistant message";
  EXPECT_EQ(chat.messages(1).role(), "assistant");
  ASSERT_EQ(chat.messages(1).tool_calls_size(), 2);
  EXPECT_EQ(chat.messages(1).tool_calls(1).id(), "c2");
  EXPECT_EQ(chat.messages(2).role(), "tool");
  EXPECT_EQ(chat.messages(2).tool_call_id(), "c1");
  EXPECT_EQ(chat.messages(3).content(), "rain");
  EXPECT_EQ(r->tools[0]["name"], "weather") << "echoed as given";
}

// A reasoning item sent back goes with the assistant message after it, as chat's `reasoning`.
TEST(ResponsesRequestTest, ReasoningItemsGoWithTheAssistantMessageAfterThem) {
  absl::StatusOr<ResponsesRequest> r = ParseResponsesRequest(R"({"input": [
      {"role": "user", "content": "2+2?"},
      {"type": "reasoning", "id": "rs_1", "summary": [],
       "content": [{"type": "reasoning_text", "text": "add them"}]},
      {"role": "assistant", "content": "4"},
      {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "s"}]},
      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c", "output": "o"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ChatPrompt& chat = r->chat.prompts.at(0).chat();
  ASSERT_EQ(chat.messages_size(), 4);
  EXPECT_FALSE(chat.messages(0).has_reasoning());
  EXPECT_EQ(chat.messages(1).reasoning(), "add them");
  EXPECT_EQ(chat.messages(2).reasoning(), "s") << "the summary when there is no full text";
  EXPECT_EQ(chat.messages(2).tool_calls_size(), 1);
  EXPECT_FALSE(ParseResponsesRequest(
                   R"({"input": [{"type": "reasoning", "encrypted_content": "x", "summary": []}]})")
                   .ok());
}

TEST(ResponsesRequestTest, WhatIsNotServedIsRefusedByName) {
  struct Case {
    const char* body;
    const char* message;
  };
  const std::vector<Case> cases = {
      {R"({})", "input is required"},
      {R"({"input": []})", "1 to 1024 items"},
      {R"({"input": 3})", "input must be a string or a list of input items"},
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", "pagellm serves function tools"},
      {R"({"input": "x", "tool_choice": {"type": "web_search"}})", "tool_choice must be"},
      {R"({"input": [{"type": "function_call_output", "output": "o"}]})", "input[0].call_id"},
      {R"({"input": [{"type": "file_search_call", "id": "f"}]})", "file_search_call"},
      {R"({"input": "x", "previous_response_id": "resp_1"})", "stores no responses"},
      {R"({"input": "x", "background": true})", "background"},
      {R"({"input": "x", "reasoning": {"effort": "low"}})", "reasoning"},
      {R"({"input": "x", "include": ["message.output_text.logprobs"]})", "include"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})",
       "input_image"},
      {R"({"input": [{"role": "tool", "content": "t"}]})", "input[0].role"},
      {R"({"input": "x", "text": {"format": {"type": "grammar"}}})", "text.format.type"},
      {R"({"input": "x", "metadata": {"k": 1}})", "metadata"},
      {R"({"input": "x", "max_output_tokens": "many"})", "max_output_tokens"},
      {R"([1])", "JSON object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    absl::StatusOr<ResponsesRequest> r = ParseResponsesRequest(c.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
  std::string many = R"({"input": [)";
  for (int i = 0; i <= kMaxResponsesInputItems; ++i) many += R"({"role": "user", "content": "a"},)";
  many.back() = ']';
  many += "}";
  EXPECT_FALSE(ParseResponsesRequest(many).ok());
}

v1::GenerateResponse Delta(const std::string& text, v1::FinishReason finish = {}) {
  v1::GenerateResponse m;
  v1::SampleDelta* d = m.add_deltas();
  d->set_text(text);
  d->set_finish_reason(finish);
  if (finish != v1::FINISH_REASON_UNSPECIFIED) {
    m.mutable_usage()->set_prompt_tokens(5);
    m.mutable_usage()->set_completion_tokens(2);
    m.set_finished(true);
  }
  return m;
}

ResponsesResponse::Config TestConfig() {
  ResponsesResponse::Config c;
  c.id = "resp_1";
  c.item_id = "msg_1";
  c.created_at = 100;
  c.model = "m";
  c.echo.max_output_tokens = 2;
  return c;
}

TEST(ResponsesResponseTest, BodyIsAResponseObjectWithOneAssistantMessage) {
  ResponsesResponse r(TestConfig());
  r.Append(0, Delta("Hel"), nullptr);
  r.Append(0, Delta("lo", v1::FINISH_REASON_STOP), nullptr);
  Json j = Json::parse(r.Body());
  EXPECT_EQ(j["id"], "resp_1");
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["max_output_tokens"], 2);
  EXPECT_TRUE(j["incomplete_details"].is_null());
  ASSERT_EQ(j["output"].size(), 1u);
  EXPECT_EQ(j["output"][0]["type"], "message");
  EXPECT_EQ(j["output"][0]["role"], "assistant");
  EXPECT_EQ(j["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(j["usage"]["input_tokens"], 5);
  EXPECT_EQ(j["usage"]["output_tokens"], 2);
  EXPECT_EQ(j["usage"]["total_tokens"], 7);

  // Ended by the length limit: incomplete, and why.
  ResponsesResponse cut(TestConfig());
  cut.Append(0, Delta("Hi", v1::FINISH_REASON_LENGTH), nullptr);
  j = Json::parse(cut.Body());
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(j["output"][0]["status"], "incomplete");
}

// With tools, the reply is read as chat reads it: text before the calls is a message item, each
// call a function_call item; streamed, the items come whole at the end.
// The stream's events, parsed: (event name, data).
std::vector<std::pair<std::string, Json>> Events(const std::string& sse) {
  std::vector<std::pair<std::string, Json>> out;
  for (absl::string_view block : absl::StrSplit(sse, "\n\n", absl::SkipEmpty())) {
    std::vector<std::string> lines = absl::StrSplit(block, '\n');
    EXPECT_EQ(lines.size(), 2u) << block;
    if (lines.size() != 2) continue;
    EXPECT_TRUE(absl::StartsWith(lines[0], "event: ")) << lines[0];
    EXPECT_TRUE(absl::StartsWith(lines[1], "data: ")) << lines[1];
    out.emplace_back(lines[0].substr(7), Json::parse(lines[1].substr(6)));
  }
  return out;
}

// A reply streamed in `pieces` (the last ends it): the events' names, and each kind of delta
// joined.
struct Streamed {
  std::vector<std::string> names;
  std::map<std::string, std::string> deltas;
};
Streamed Stream(const ResponsesResponse::Config& config, const std::vector<std::string>& pieces) {
  ResponsesResponse r(config);
  std::string sse;
  r.AppendStart(&sse);
  for (size_t i = 0; i < pieces.size(); ++i) {
    r.Append(0,
             Delta(pieces[i],
                   i + 1 == pieces.size() ? v1::FINISH_REASON_STOP : v1::FINISH_REASON_UNSPECIFIED),
             &sse);
  }
  r.AppendEnd(&sse);
  Streamed out;
  for (const auto& [name, data] : Events(sse)) {
    out.names.push_back(name);
    if (absl::EndsWith(name, ".delta")) out.deltas[name] += data["delta"].get<std::string>();
  }
  return out;
}

TEST(ResponsesResponseTest, ToolCallsAreFunctionCallItems) {
  ResponsesResponse::Config config = TestConfig();
  config.echo.chat.tool_choice.mode = ToolChoice::Mode::kAuto;
  config.tool_format = ToolCallFormat::kHermes;
  config.call_id = [] { return std::string("call_1"); };
  const std::string reply =
      R"(Checking.<tool_call>{"name": "weather", "arguments": {"city": "Paris"}}</tool_call>)";
  ResponsesResponse r(config);
  r.Append(0, Delta(reply, v1::FINISH_REASON_STOP), nullptr);
  Json j = Json::parse(r.Body());
  EXPECT_EQ(j["status"], "completed");
  ASSERT_EQ(j["output"].size(), 2u);
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Checking.");
  const Json& call = j["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["call_id"], "call_1");
  EXPECT_EQ(call["name"], "weather");
  EXPECT_EQ(call["arguments"], R"({"city": "Paris"})");
  EXPECT_TRUE(absl::StartsWith(call["id"].get<std::string>(), "fc_"));

  const Streamed s = Stream(config, {reply.substr(0, 20), reply.substr(20)});
  EXPECT_EQ(
      s.names,
      (std::vector<std::string>{
          "response.created", "response.in_progress", "response.output_item.added",
          "response.content_part.added", "response.output_text.delta", "response.output_text.done",
          "response.content_part.done", "response.output_item.done", "response.output_item.added",
          "response.function_call_arguments.delta", "response.function_call_arguments.done",
          "response.output_item.done", "response.completed"}));
  EXPECT_EQ(s.deltas.at("response.function_call_arguments.delta"), R"({"city": "Paris"})");
}

// With the router's reasoning parser, the reasoning is an item of its own before the answer.
TEST(ResponsesResponseTest, ReasoningIsAReasoningItemFirst) {
  ResponsesResponse::Config config = TestConfig();
  config.reasoning = true;
  const std::string reply = "<think>\nhmm</think>4";
  ResponsesResponse r(config);
  r.Append(0, Delta(reply, v1::FINISH_REASON_STOP), nullptr);
  Json j = Json::parse(r.Body());
  ASSERT_EQ(j["output"].size(), 2u) << j.dump();
  EXPECT_EQ(j["output"][0]["type"], "reasoning");
  EXPECT_EQ(j["output"][0]["content"][0]["type"], "reasoning_text");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "\nhmm");
  EXPECT_EQ(j["output"][1]["type"], "message");
  EXPECT_EQ(j["output"][1]["content"][0]["text"], "4");

  const Streamed s = Stream(config, {reply.substr(0, 5), reply.substr(5)});
  EXPECT_EQ(s.names, (std::vector<std::string>{
                         "response.created", "response.in_progress", "response.output_item.added",
                         "response.reasoning_text.delta", "response.reasoning_text.done",
                         "response.output_item.done", "response.output_item.added",
                         "response.content_part.added", "response.output_text.delta",
                         "response.output_text.done", "response.content_part.done",
                         "response.output_item.done", "response.completed"}));
  EXPECT_EQ(s.deltas.at("response.reasoning_text.delta"), "\nhmm");
  EXPECT_EQ(s.deltas.at("response.output_text.delta"), "4") << "no reasoning in the answer's text";

  // Cut short while reasoning: the reasoning item alone.
  ResponsesResponse cut(config);
  cut.Append(0, Delta("<think>cut short", v1::FINISH_REASON_LENGTH), nullptr);
  j = Json::parse(cut.Body());
  ASSERT_EQ(j["output"].size(), 1u);
  EXPECT_EQ(j["output"][0]["type"], "reasoning");
  EXPECT_EQ(j["status"], "incomplete");
}

TEST(ResponsesResponseTest, StreamIsTheNamedEventsInOrder) {
  ResponsesResponse r(TestConfig());
  std::string sse;
  r.AppendStart(&sse);
  r.Append(0, Delta("Hel"), &sse);
  r.Append(0, Delta("lo", v1::FINISH_REASON_STOP), &sse);
  r.AppendEnd(&sse);
  const auto events = Events(sse);
  std::vector<std::string> names;
  for (int i = 0; i < static_cast<int>(events.size()); ++i) {
    names.push_back(events[i].first);
    EXPECT_EQ(events[i].second["type"], events[i].first);
    EXPECT_EQ(events[i].second["sequence_number"], i);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"response.created", "response.in_progress",
                                      "response.output_item.added", "response.content_part.added",
                                      "response.output_text.delta", "response.output_text.delta",
                                      "response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[0].second["response"]["status"], "in_progress");
  EXPECT_EQ(events[4].second["delta"], "Hel");
  EXPECT_EQ(events[4].second["item_id"], "msg_1");
  EXPECT_EQ(events[6].second["text"], "Hello");
  EXPECT_EQ(events[9].second["response"]["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(events[9].second["response"]["usage"]["output_tokens"], 2);
  EXPECT_EQ(sse.find("[DONE]"), std::string::npos);

  // A failure after the start: an error event, then response.failed; nothing after.
  ResponsesResponse f(TestConfig());
  std::string failed;
  f.AppendStart(&failed);
  f.AppendError(absl::UnavailableError("worker lost"), &failed);
  f.AppendEnd(&failed);
  const auto fe = Events(failed);
  ASSERT_EQ(fe.size(), 6u);
  EXPECT_EQ(fe[4].first, "error");
  EXPECT_EQ(fe[4].second["message"], "worker lost");
  EXPECT_EQ(fe[5].first, "response.failed");
  EXPECT_EQ(fe[5].second["response"]["status"], "failed");
}

}  // namespace
}  // namespace pagellm
