// Reading tool calls out of generated text: the "required" array, hermes blocks (as vLLM's
// hermes parser reads them), hermes blocks as they stream, and Python-style JSON for the
// arguments. Expected JSON texts are Python 3.11's json.dumps(value, ensure_ascii=False).
#include "router/http/tool_calls.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::MatchesRegex;

TEST(PyJsonDumpsTest, WritesWhatPythonJsonDumpsWrites) {
  EXPECT_EQ(
      PyJsonDumps(Json::parse(
          R"({"city": "Paris", "n": [1, 2.5, true, null], "nested": {"a": {}}, "e": []})")),
      "{\"city\": \"Paris\", \"n\": [1, 2.5, true, null], \"nested\": {\"a\": {}}, \"e\": []}");
  EXPECT_EQ(
      PyJsonDumps(Json::parse("{\"text\": \"\\u00e9\\ud83d\\ude00\\n\\t\\\"\\\\\\u0001\\u007f\"}")),
      "{\"text\": \"\u00e9\U0001F600\\n\\t\\\"\\\\\\u0001\x7f\"}");
  EXPECT_EQ(PyJsonDumps(Json::parse("[1e100, -0.0, 1.0, 12345678901234567890]")),
            "[1e+100, -0.0, 1.0, 12345678901234567890]");
}

TEST(RequiredToolCallsTest, ReadsTheArrayOfCalls) {
  auto calls = ParseRequiredToolCalls(
      R"([{"name": "get_weather", "parameters": {"city":"Oslo"}}, {"name":"get_time","parameters":{}}])");
  ASSERT_TRUE(calls.has_value());
  EXPECT_THAT(*calls, ::testing::ElementsAre(ParsedToolCall{"get_weather", R"({"city": "Oslo"})"},
                                             ParsedToolCall{"get_time", "{}"}));
}

TEST(RequiredToolCallsTest, TextThatIsNotAListOfCallsIsNone) {
  EXPECT_FALSE(ParseRequiredToolCalls(R"([{"name": "f", "parameters": {"a": 1)").has_value());
  EXPECT_FALSE(ParseRequiredToolCalls(R"({"name": "f", "parameters": {}})").has_value());
  EXPECT_FALSE(ParseRequiredToolCalls(R"([{"name": 1, "parameters": {}}])").has_value());
  EXPECT_FALSE(ParseRequiredToolCalls(R"([{"name": "f"}])").has_value());
  EXPECT_FALSE(ParseRequiredToolCalls("").has_value());
}

TEST(HermesToolCallsTest, TextWithoutBlocksIsContent) {
  ParsedReply r = ParseToolCalls(ToolCallFormat::kHermes, "The weather is fine.");
  EXPECT_EQ(r.content, "The weather is fine.");
  EXPECT_TRUE(r.calls.empty());
}

TEST(HermesToolCallsTest, BlocksAreCallsAndTheTextBeforeThemContent) {
  ParsedReply r = ParseToolCalls(
      ToolCallFormat::kHermes,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
      "</tool_call>trailing text is dropped");
  EXPECT_EQ(r.content, "Let me check.\n");
  EXPECT_THAT(r.calls, ::testing::ElementsAre(ParsedToolCall{"get_weather", R"({"city": "Oslo"})"},
                                              ParsedToolCall{"get_time", "{}"}));
}

TEST(HermesToolCallsTest, NoTextBeforeTheFirstBlockIsNoContent) {
  ParsedReply r =
      ParseToolCalls(ToolCallFormat::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}");
  EXPECT_FALSE(r.content.has_value());  // and an unclosed last block is read to the end
  EXPECT_THAT(r.calls, ::testing::ElementsAre(ParsedToolCall{"f", "[1]"}));
}

TEST(HermesToolCallsTest, ABlockThatDoesNotParseMakesItAllContent) {
  for (const char* text : {
           "a<tool_call>{\"name\": \"f\", \"arguments\": "
           "{}}</tool_call><tool_call>{bad</tool_call>",
           "<tool_call>{\"arguments\": {}}</tool_call>",  // no name
           "<tool_call>{\"name\": \"f\"}</tool_call>",    // no arguments
           "<tool_call>[1]</tool_call>",
       }) {
    ParsedReply r = ParseToolCalls(ToolCallFormat::kHermes, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty()) << text;
  }
}

// Feeds `text` to `parser` in pieces of `step` bytes; returns the content and the calls.
std::pair<std::string, std::vector<ParsedToolCall>> Stream(
    std::unique_ptr<ToolCallStreamParser> parser, const std::string& text, size_t step) {
  std::string content;
  std::vector<ParsedToolCall> calls;
  for (size_t i = 0; i < text.size(); i += step) {
    parser->Feed(std::string_view(text).substr(i, step), &content, &calls);
  }
  parser->Finish(&content, &calls);
  return {content, calls};
}

std::pair<std::string, std::vector<ParsedToolCall>> Stream(ToolCallFormat format,
                                                           const std::string& text, size_t step) {
  return Stream(NewToolCallStreamParser(format), text, step);
}

// Streamed in any pieces, a reply reads as it reads whole.
void ExpectStreamsAsWhole(ToolCallFormat format, const std::vector<std::string>& texts) {
  for (const std::string& text : texts) {
    ParsedReply whole = ParseToolCalls(format, text);
    for (size_t step : {1, 2, 3, 7, 1000}) {
      auto [content, calls] = Stream(format, text, step);
      EXPECT_EQ(content, whole.content.value_or("")) << text << " in steps of " << step;
      EXPECT_EQ(calls, whole.calls) << text << " in steps of " << step;
    }
  }
}

TEST(HermesStreamTest, StreamedInAnyPiecesReadsAsTheWholeReply) {
  ExpectStreamsAsWhole(
      ToolCallFormat::kHermes,
      {"plain text with < and <tool and <tool_cal but no block",
       "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"<tool_call>\"}}\n</tool_call>\n<tool_call>{\"name\": \"g\", \"arguments\": {}}"
       "</tool_call>\n",
       "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}"});  // unclosed
}

TEST(HermesStreamTest, ContentIsHandedOutBeforeTheReplyEnds) {
  std::unique_ptr<ToolCallStreamParser> parser = NewToolCallStreamParser(ToolCallFormat::kHermes);
  std::string content;
  std::vector<ParsedToolCall> calls;
  parser->Feed("Hello <to", &content, &calls);
  EXPECT_EQ(content, "Hello ");  // "<to" may still become "<tool_call>"
  parser->Feed("day", &content, &calls);
  EXPECT_EQ(content, "Hello <today");
  parser->Feed(" <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool", &content, &calls);
  EXPECT_EQ(content, "Hello <today ");
  EXPECT_TRUE(calls.empty());
  parser->Feed("_call>", &content, &calls);
  EXPECT_THAT(calls, ::testing::ElementsAre(ParsedToolCall{"f", "{}"}));
}

TEST(HermesStreamTest, ABlockThatDoesNotParseStreamsAsContent) {
  auto [content, calls] =
      Stream(ToolCallFormat::kHermes,
             "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call><tool_call>{oops", 4);
  EXPECT_THAT(calls, ::testing::ElementsAre(ParsedToolCall{"f", "{}"}));
  EXPECT_EQ(content, "<tool_call>{oops");
}

TEST(Llama3JsonToolCallsTest, AReplyStartingWithAnObjectIsCalls) {
  ParsedReply r = ParseToolCalls(
      ToolCallFormat::kLlama3Json,
      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; "
      "{\"name\": \"get_time\", \"arguments\": {}}");
  EXPECT_FALSE(r.content.has_value());
  EXPECT_THAT(r.calls, ::testing::ElementsAre(ParsedToolCall{"get_weather", R"({"city": "Oslo"})"},
                                              ParsedToolCall{"get_time", "{}"}));
  r = ParseToolCalls(ToolCallFormat::kLlama3Json,
                     " \n{\"name\": \"f\", \"parameters\": {\"s\": \"}{;\"}}\n");
  EXPECT_THAT(r.calls, ::testing::ElementsAre(ParsedToolCall{"f", R"({"s": "}{;"})"}));
}

TEST(Llama3JsonToolCallsTest, AnythingElseIsText) {
  for (const char* text : {
           "The answer is {\"name\": \"f\", \"parameters\": {}}",  // text first
           "{\"city\": \"Oslo\"}",                                 // JSON, not a call
           "{\"name\": \"f\", \"parameters\": {}} and more",       // text after
           "{\"name\": \"f\", \"parameters\": {",                  // cut short
           "{\"name\": \"f\", \"parameters\": {}}; oops",
       }) {
    ParsedReply r = ParseToolCalls(ToolCallFormat::kLlama3Json, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty()) << text;
  }
}

TEST(Llama3JsonStreamTest, StreamedInAnyPiecesReadsAsTheWholeReply) {
  ExpectStreamsAsWhole(ToolCallFormat::kLlama3Json,
                       {"Plain text, streamed as it comes.", "  <|python is not the tag",
                        "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": [1, 2]}}",
                        "{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", "
                        "\"arguments\": {\"b\": null}}",
                        "{\"not\": \"a call\"}", ""});
}

TEST(Llama3JsonStreamTest, TextStreamsAtOnceAndCallsAtTheEnd) {
  std::unique_ptr<ToolCallStreamParser> parser =
      NewToolCallStreamParser(ToolCallFormat::kLlama3Json);
  std::string content;
  std::vector<ParsedToolCall> calls;
  parser->Feed(" ", &content, &calls);
  EXPECT_EQ(content, "");  // undecided
  parser->Feed("Hi", &content, &calls);
  EXPECT_EQ(content, " Hi");
  parser->Feed(" there", &content, &calls);
  EXPECT_EQ(content, " Hi there");

  parser = NewToolCallStreamParser(ToolCallFormat::kLlama3Json);
  content.clear();
  parser->Feed("{\"name\": \"f\", ", &content, &calls);
  parser->Feed("\"parameters\": {}}", &content, &calls);
  EXPECT_EQ(content, "");
  EXPECT_TRUE(calls.empty());
  parser->Finish(&content, &calls);
  EXPECT_THAT(calls, ::testing::ElementsAre(ParsedToolCall{"f", "{}"}));
}

TEST(MistralToolCallsTest, CallsFollowTheToolCallsToken) {
  // v3 tokenizers: a JSON array.
  ParsedReply r = ParseToolCalls(
      ToolCallFormat::kMistral,
      "Sure. [TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
      "{\"name\": \"get_time\", \"arguments\": {}}]");
  EXPECT_EQ(r.content, "Sure. ");
  EXPECT_THAT(r.calls, ::testing::ElementsAre(ParsedToolCall{"get_weather", R"({"city": "Oslo"})"},
                                              ParsedToolCall{"get_time", "{}"}));
  // v11 and later: name[ARGS]{...} per call.
  r = ParseToolCalls(
      ToolCallFormat::kMistral,
      "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]get_time[ARGS]{}");
  EXPECT_FALSE(r.content.has_value());
  EXPECT_THAT(r.calls, ::testing::ElementsAre(ParsedToolCall{"get_weather", R"({"city": "Oslo"})"},
                                              ParsedToolCall{"get_time", "{}"}));
  for (const char* text :
       {"no calls here", "[TOOL_CALLS] [{\"name\": \"f\"}]",
        "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {", "[TOOL_CALLS]f{}", "[TOOL_CALLS] []"}) {
    r = ParseToolCalls(ToolCallFormat::kMistral, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty()) << text;
  }
}

TEST(MistralStreamTest, StreamedInAnyPiecesReadsAsTheWholeReply) {
  ExpectStreamsAsWhole(
      ToolCallFormat::kMistral,
      {"Plain [TOOL text [TOOL_CALL",
       "Sure. [TOOL_CALLS] [{\"name\": \"f\", "
       "\"arguments\": {\"a\": \"[TOOL_CALLS]\"}}]",
       "[TOOL_CALLS]f[ARGS]{\"x\": 1}[TOOL_CALLS]g[ARGS]{}", "text [TOOL_CALLS] not json"});
}

TEST(RequiredStreamTest, StreamedInAnyPiecesReadsAsTheWholeReply) {
  for (const std::string& text : {
           std::string(R"([{"name": "f", "parameters": {"a": "}]\"{", "b": [1, {"c": 2}]}}, )"
                       R"( {"name": "g", "parameters": {}}])"),
           std::string(R"([{"name": "f", "parameters": {"a": 1)"),  // cut short: content
       }) {
    std::optional<std::vector<ParsedToolCall>> whole = ParseRequiredToolCalls(text);
    EXPECT_EQ(whole.has_value(), text.back() == ']') << text;  // the whole list, or cut short
    for (size_t step : {1, 2, 5, 1000}) {
      auto [content, calls] = Stream(NewRequiredStreamParser(), text, step);
      EXPECT_EQ(calls, whole.value_or(std::vector<ParsedToolCall>())) << text << " / " << step;
      EXPECT_EQ(content, whole.has_value() ? "" : text) << text << " / " << step;
    }
  }
}

TEST(ToolCallIdTest, IsVllmsFormAndNew) {
  const std::string a = NewToolCallId();
  EXPECT_THAT(a, MatchesRegex("chatcmpl-tool-[0-9a-f]{32}"));
  EXPECT_NE(a, NewToolCallId());
  // Mistral's templates raise on other ids.
  const std::string m = NewToolCallId(ToolCallFormat::kMistral);
  EXPECT_THAT(m, MatchesRegex("[A-Za-z0-9]{9}"));
  EXPECT_NE(m, NewToolCallId(ToolCallFormat::kMistral));
}

}  // namespace
}  // namespace pagellm
