// libFuzzer target for reading a model's reply (router/http/tool_calls.h, reasoning.h): the
// bytes are a generated text, read whole and streamed in pieces whose sizes the first byte
// picks.
//
// Invariants (abort() when one fails): streamed, every tool-call format and the reasoning split
// give what they give for the whole text (hermes: when the whole text holds no block that fails
// to parse, as a streamed failure comes out as content after earlier calls); calls' arguments
// are JSON.
//
// Build and run: see tools/fuzz/run_ci.sh (seeds in tools/fuzz/seeds/tool_reply_fuzz/;
// dictionary tools/fuzz/tool_reply.dict).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "router/http/reasoning.h"
#include "router/http/tool_calls.h"
#include "tools/fuzz/fuzz_check.h"

namespace {

using pagellm::ParsedToolCall;

struct Streamed {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

Streamed Stream(pagellm::ToolCallStreamParser& parser, std::string_view text, size_t step) {
  Streamed out;
  for (size_t i = 0; i < text.size(); i += step) {
    parser.Feed(text.substr(i, step), &out.content, &out.calls);
  }
  parser.Finish(&out.content, &out.calls);
  return out;
}

void CheckArguments(const std::vector<ParsedToolCall>& calls) {
  for (const ParsedToolCall& call : calls) {
    FUZZ_CHECK(nlohmann::json::accept(call.arguments));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 8;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  for (pagellm::ToolCallFormat format :
       {pagellm::ToolCallFormat::kHermes, pagellm::ToolCallFormat::kLlama3Json,
        pagellm::ToolCallFormat::kMistral}) {
    const pagellm::ParsedReply whole = pagellm::ParseToolCalls(format, text);
    CheckArguments(whole.calls);
    Streamed s = Stream(*pagellm::NewToolCallStreamParser(format), text, step);
    CheckArguments(s.calls);
    if (format != pagellm::ToolCallFormat::kHermes || !whole.calls.empty() ||
        text.find("<tool_call>") == std::string_view::npos) {
      FUZZ_CHECK(s.calls == whole.calls);
      FUZZ_CHECK(s.content == whole.content.value_or(""));
    }
  }

  const std::optional<std::vector<ParsedToolCall>> required = pagellm::ParseRequiredToolCalls(text);
  Streamed s = Stream(*pagellm::NewRequiredStreamParser(), text, step);
  CheckArguments(s.calls);
  if (required.has_value()) {
    FUZZ_CHECK(s.calls == *required);
    FUZZ_CHECK(s.content.empty());
  } else if (s.calls.empty()) {
    FUZZ_CHECK(s.content == text);
  }

  const pagellm::ReasoningSplit split = pagellm::SplitReasoning(text);
  pagellm::ReasoningStreamSplitter splitter;
  std::string reasoning, content;
  for (size_t i = 0; i < text.size(); i += step) {
    splitter.Feed(text.substr(i, step), &reasoning, &content);
  }
  splitter.Finish(&reasoning, &content);
  FUZZ_CHECK(reasoning == split.reasoning.value_or(""));
  FUZZ_CHECK(content == split.content.value_or(""));
  return 0;
}
