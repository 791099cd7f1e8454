// The request side of tool calling: tools, tool_choice and the tool fields of messages read
// into the ChatPrompt and the structured output, with vLLM's defaults. (Refusals are in
// openai_request_test's error cases.)
#include "router/http/openai_tools.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/http/openai_request.h"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kWeather[] =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather.", )"
    R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, )"
    R"("required": ["city"]}, "strict": true}})";
constexpr char kTime[] = R"({"function": {"name": "get_time"}})";

OpenAiRequest Parse(const std::string& extra) {
  absl::StatusOr<OpenAiRequest> r = ParseChatRequest(
      absl::StrCat(R"({"messages": [{"role": "user", "content": "hi"}], )", extra, "}"));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : OpenAiRequest{};
}

TEST(OpenAiToolsTest, ToolsGoToTheChatPrompt) {
  OpenAiRequest r = Parse(absl::StrCat(R"("tools": [)", kWeather, ", ", kTime, "]"));
  const v1::ChatPrompt& chat = r.prompts[0].chat();
  ASSERT_EQ(chat.tools_size(), 2);
  EXPECT_EQ(chat.tools(0).name(), "get_weather");
  EXPECT_EQ(chat.tools(0).description(), "Weather.");
  EXPECT_EQ(Json::parse(chat.tools(0).parameters()),
            Json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]})"));
  EXPECT_TRUE(chat.tools(0).has_strict() && chat.tools(0).strict());
  EXPECT_EQ(chat.tools(1).name(), "get_time");
  EXPECT_FALSE(chat.tools(1).has_description());
  EXPECT_EQ(chat.tools(1).parameters(), "");
}

TEST(OpenAiToolsTest, ToolChoiceDefaultsToAutoWithToolsAndNoneWithout) {
  EXPECT_EQ(Parse(absl::StrCat(R"("tools": [)", kTime, "]")).tool_choice.mode,
            ToolChoice::Mode::kAuto);
  EXPECT_EQ(Parse(R"("tools": [])").tool_choice.mode, ToolChoice::Mode::kNone);
  EXPECT_EQ(Parse(R"("tool_choice": "none")").tool_choice.mode, ToolChoice::Mode::kNone);
  OpenAiRequest none = Parse(absl::StrCat(R"("tools": [)", kTime, R"(], "tool_choice": "none")"));
  EXPECT_EQ(none.tool_choice.mode, ToolChoice::Mode::kNone);
  EXPECT_EQ(none.prompts[0].chat().tools_size(), 1);  // still shown to the template
  EXPECT_FALSE(none.prompts[0].sampling().has_structured_output());
}

TEST(OpenAiToolsTest, NamedChoiceConstrainsTheReplyToTheFunctionsParameters) {
  OpenAiRequest r = Parse(absl::StrCat(
      R"("tools": [)", kTime, ", ", kWeather,
      R"(], "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"));
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kNamed);
  EXPECT_EQ(r.tool_choice.name, "get_weather");
  EXPECT_EQ(Json::parse(r.prompts[0].sampling().structured_output().json_schema()),
            Json::parse(r.prompts[0].chat().tools(1).parameters()));
  // A function without parameters takes an empty object.
  r = Parse(
      absl::StrCat(R"("tools": [)", kTime,
                   R"(], "tool_choice": {"type": "function", "function": {"name": "get_time"}})"));
  EXPECT_EQ(Json::parse(r.prompts[0].sampling().structured_output().json_schema()),
            Json::parse(R"({"type": "object", "properties": {}})"));
}

TEST(OpenAiToolsTest, RequiredConstrainsTheReplyToAListOfCalls) {
  OpenAiRequest r = Parse(
      absl::StrCat(R"("tools": [)", kWeather, ", ", kTime, R"(], "tool_choice": "required")"));
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kRequired);
  EXPECT_EQ(Json::parse(r.prompts[0].sampling().structured_output().json_schema()),
            Json::parse(R"({"type": "array", "minItems": 1, "items": {"anyOf": [
              {"type": "object", "properties": {
                 "name": {"type": "string", "enum": ["get_weather"]},
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                "required": ["city"]}},
               "required": ["name", "parameters"]},
              {"type": "object", "properties": {
                 "name": {"type": "string", "enum": ["get_time"]},
                 "parameters": {"type": "object", "properties": {}}},
               "required": ["name", "parameters"]}]}})"));
  // parallel_tool_calls false: one call.
  r = Parse(absl::StrCat(R"("tools": [)", kTime,
                         R"(], "tool_choice": "required", "parallel_tool_calls": false)"));
  EXPECT_FALSE(r.tool_choice.parallel_tool_calls);
  Json schema = Json::parse(r.prompts[0].sampling().structured_output().json_schema());
  EXPECT_EQ(schema["maxItems"], 1);
  // "required" of no tools is "none", as in vLLM.
  EXPECT_EQ(Parse(R"("tools": [], "tool_choice": "required")").tool_choice.mode,
            ToolChoice::Mode::kNone);
}

TEST(OpenAiToolsTest, RequiredMovesEachToolsDefsToTheTop) {
  OpenAiRequest r = Parse(
      R"("tool_choice": "required", "tools": [
          {"function": {"name": "f", "parameters": {"type": "object",
             "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "string"}}}}},
          {"function": {"name": "g", "parameters": {"type": "object",
             "properties": {"q": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "string"}}}}}])");
  Json schema = Json::parse(r.prompts[0].sampling().structured_output().json_schema());
  EXPECT_EQ(schema["$defs"], Json::parse(R"({"P": {"type": "string"}})"));
  EXPECT_FALSE(schema["items"]["anyOf"][0]["properties"]["parameters"].contains("$defs"));
}

TEST(OpenAiToolsTest, MessagesCarryCallsAndResults) {
  absl::StatusOr<OpenAiRequest> r = ParseChatRequest(R"({"messages": [
      {"role": "user", "content": "weather?", "name": "ann"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
        {"id": "c2", "function": {"name": "get_time", "arguments": {"tz": "UTC"}}},
        {"id": "c3", "function": {"name": "get_time"}}]},
      {"role": "tool", "content": "-3 C", "tool_call_id": "c1"},
      {"role": "assistant", "content": "ok", "reasoning_content": "DeepSeek's name"},
      {"role": "assistant", "content": "ok", "reasoning": "vLLM's name",
       "reasoning_content": "vLLM's name"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ChatPrompt& chat = r->prompts[0].chat();
  ASSERT_EQ(chat.messages_size(), 5);
  EXPECT_EQ(chat.messages(0).name(), "ann");
  const v1::ChatMessage& a = chat.messages(1);
  EXPECT_EQ(a.content(), "");  // null: "" to the template, as vLLM passes it
  ASSERT_EQ(a.tool_calls_size(), 3);
  EXPECT_EQ(a.tool_calls(0).id(), "c1");
  EXPECT_EQ(a.tool_calls(0).name(), "get_weather");
  EXPECT_EQ(a.tool_calls(0).arguments(), R"({"city": "Oslo"})");
  EXPECT_EQ(Json::parse(a.tool_calls(1).arguments()), Json::parse(R"({"tz": "UTC"})"));
  EXPECT_EQ(a.tool_calls(2).arguments(), "");
  EXPECT_FALSE(a.has_tool_call_id());
  EXPECT_EQ(chat.messages(2).tool_call_id(), "c1");
  EXPECT_FALSE(chat.messages(2).has_name());
  EXPECT_FALSE(chat.messages(2).has_reasoning());
  EXPECT_EQ(chat.messages(3).reasoning(), "DeepSeek's name");
  EXPECT_EQ(chat.messages(4).reasoning(), "vLLM's name");
}

}  // namespace
}  // namespace pagellm
