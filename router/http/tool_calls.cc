#include "router/http/tool_calls.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_format.h"
#include "common/json/json_scan.h"
#include "common/json/strict_json.h"
#include "router/http/partial_tag.h"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;

// Nesting of a reply's JSON (the schemas the replies follow are bounded the same way).
constexpr int kMaxReplyDepth = 72;

void AppendPyJson(const Json& j, std::string* out) {
  if (j.is_object()) {
    out->push_back('{');
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      if (!first) out->append(", ");
      first = false;
      out->append(Json(key).dump(-1, ' ', false, Json::error_handler_t::replace));
      out->append(": ");
      AppendPyJson(value, out);
    }
    out->push_back('}');
  } else if (j.is_array()) {
    out->push_back('[');
    for (size_t i = 0; i < j.size(); ++i) {
      if (i > 0) out->append(", ");
      AppendPyJson(j[i], out);
    }
    out->push_back(']');
  } else {
    out->append(j.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
}

// One call's JSON: {"name": string, `arguments`: value} (or `alternative` for `arguments`).
std::optional<ParsedToolCall> ParseNamedCall(std::string_view json, const char* arguments,
                                             const char* alternative) {
  absl::StatusOr<Json> j = ParseStrictJson(json, {.max_depth = kMaxReplyDepth});
  if (!j.ok() || !j->is_object()) return std::nullopt;
  auto name = j->find("name");
  auto args = j->find(arguments);
  if (args == j->end() && alternative != nullptr) args = j->find(alternative);
  if (name == j->end() || !name->is_string() || args == j->end()) return std::nullopt;
  return ParsedToolCall{name->get<std::string>(), PyJsonDumps(*args)};
}

}  // namespace

std::string PyJsonDumps(const Json& j) {
  std::string out;
  AppendPyJson(j, &out);
  return out;
}

std::optional<std::vector<ParsedToolCall>> ParseRequiredToolCalls(std::string_view text) {
  absl::StatusOr<Json> j = ParseStrictJson(text, {.max_depth = kMaxReplyDepth});
  if (!j.ok() || !j->is_array()) return std::nullopt;
  std::vector<ParsedToolCall> calls;
  for (const Json& item : *j) {
    if (!item.is_object()) return std::nullopt;
    auto name = item.find("name");
    auto parameters = item.find("parameters");
    if (name == item.end() || !name->is_string() || parameters == item.end()) {
      return std::nullopt;
    }
    calls.push_back({name->get<std::string>(), PyJsonDumps(*parameters)});
  }
  return calls;
}

namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

ParsedReply ParseHermes(std::string_view text) {
  ParsedReply reply;
  const size_t first = text.find(kHermesOpen);
  if (first == std::string_view::npos) {
    reply.content = std::string(text);
    return reply;
  }
  size_t at = first;
  while (at != std::string_view::npos) {
    const size_t begin = at + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, begin);
    const std::string_view block = text.substr(
        begin, close == std::string_view::npos ? std::string_view::npos : close - begin);
    std::optional<ParsedToolCall> call = ParseNamedCall(block, "arguments", nullptr);
    if (!call.has_value()) return ParsedReply{std::string(text), {}};
    reply.calls.push_back(*std::move(call));
    if (close == std::string_view::npos) break;
    at = text.find(kHermesOpen, close + kHermesClose.size());
  }
  if (first > 0) reply.content = std::string(text.substr(0, first));
  return reply;
}

// Where the calls of a llama3_json reply start: after leading whitespace and <|python_tag|>,
// at a '{'; npos when the reply is not calls.
size_t Llama3CallsStart(std::string_view text) {
  size_t at = text.find_first_not_of(" \t\r\n");
  if (at != std::string_view::npos && text.substr(at, kPythonTag.size()) == kPythonTag) {
    at = text.find_first_not_of(" \t\r\n", at + kPythonTag.size());
  }
  return at != std::string_view::npos && text[at] == '{' ? at : std::string_view::npos;
}

ParsedReply ParseLlama3Json(std::string_view text) {
  const ParsedReply as_text{std::string(text), {}};
  size_t at = Llama3CallsStart(text);
  if (at == std::string_view::npos) return as_text;
  ParsedReply reply;
  while (true) {
    const size_t end = ScanJsonContainer(text, at, kMaxReplyDepth).end;
    if (end == std::string_view::npos) return as_text;
    // "arguments" or, as Llama 3.1's prompt asks, "parameters".
    std::optional<ParsedToolCall> call =
        ParseNamedCall(text.substr(at, end - at), "arguments", "parameters");
    if (!call.has_value()) return as_text;
    reply.calls.push_back(*std::move(call));
    at = text.find_first_not_of(" \t\r\n", end);
    if (at == std::string_view::npos) break;
    if (text[at] != ';') return as_text;
    at = text.find_first_not_of(" \t\r\n", at + 1);
    if (at == std::string_view::npos) break;
    if (text[at] != '{') return as_text;
  }
  return reply;
}

// hermes: content until a block may start; blocks read as they close.
class HermesStreamParser final : public ToolCallStreamParser {
 public:
  void Feed(std::string_view text, std::string* content,
            std::vector<ParsedToolCall>* calls) override {
    pending_.append(text);
    Drain(/*at_end=*/false, content, calls);
  }
  void Finish(std::string* content, std::vector<ParsedToolCall>* calls) override {
    Drain(/*at_end=*/true, content, calls);
  }

 private:
  void Drain(bool at_end, std::string* content, std::vector<ParsedToolCall>* calls) {
    while (!pending_.empty()) {
      if (!in_call_) {
        const size_t open = pending_.find(kHermesOpen);
        size_t plain = open;  // pending_[0, plain) is text outside any block
        if (open == std::string::npos) {
          plain = pending_.size() - (at_end ? 0 : PartialTagSuffix(pending_, kHermesOpen));
        }
        if (!seen_call_) content->append(pending_, 0, plain);
        if (open == std::string::npos) {
          pending_.erase(0, plain);
          return;
        }
        pending_.erase(0, open + kHermesOpen.size());
        in_call_ = seen_call_ = true;
        continue;
      }
      const size_t close = pending_.find(kHermesClose);
      if (close == std::string::npos && !at_end) return;
      const std::string_view block = std::string_view(pending_).substr(0, close);
      if (std::optional<ParsedToolCall> call = ParseNamedCall(block, "arguments", nullptr)) {
        calls->push_back(*std::move(call));
      } else {
        content->append(kHermesOpen);
        content->append(block);
        if (close != std::string::npos) content->append(kHermesClose);
      }
      pending_.erase(0, close == std::string::npos ? pending_.size() : close + kHermesClose.size());
      in_call_ = false;
    }
    if (at_end && in_call_) {  // "<tool_call>" and nothing after it
      content->append(kHermesOpen);
      in_call_ = false;
    }
  }

  std::string pending_;     // text not yet handed out
  bool in_call_ = false;    // pending_ is inside a block (after its `<tool_call>`)
  bool seen_call_ = false;  // a block has started: later text outside blocks is dropped
};

// llama3_json: undecided while the reply is whitespace or a prefix of <|python_tag|>; content
// from the first other character unless the reply starts as calls, which are held to the end.
class Llama3JsonStreamParser final : public ToolCallStreamParser {
 public:
  void Feed(std::string_view text, std::string* content,
            std::vector<ParsedToolCall>* calls) override {
    if (mode_ == Mode::kText) {
      content->append(text);
      return;
    }
    pending_.append(text);
    if (mode_ == Mode::kUndecided) Decide(/*at_end=*/false, content);
  }
  void Finish(std::string* content, std::vector<ParsedToolCall>* calls) override {
    if (mode_ == Mode::kUndecided) Decide(/*at_end=*/true, content);
    if (mode_ != Mode::kCalls) return;
    ParsedReply reply = ParseLlama3Json(pending_);
    if (reply.content.has_value()) content->append(*reply.content);
    for (ParsedToolCall& call : reply.calls) calls->push_back(std::move(call));
    pending_.clear();
  }

 private:
  enum class Mode { kUndecided, kText, kCalls };
  void Decide(bool at_end, std::string* content) {
    const size_t at = pending_.find_first_not_of(" \t\r\n");
    if (at == std::string::npos && !at_end) return;
    const std::string_view rest =
        at == std::string::npos ? std::string_view() : std::string_view(pending_).substr(at);
    if (!at_end) {
      if (rest.size() < kPythonTag.size() && kPythonTag.substr(0, rest.size()) == rest) {
        return;  // may still be <|python_tag|>
      }
      if (rest.substr(0, kPythonTag.size()) == kPythonTag &&
          rest.find_first_not_of(" \t\r\n", kPythonTag.size()) == std::string_view::npos) {
        return;  // the tag, and what follows it not yet
      }
    }
    if (Llama3CallsStart(pending_) != std::string::npos) {
      mode_ = Mode::kCalls;
      return;
    }
    mode_ = Mode::kText;
    content->append(pending_);
    pending_.clear();
  }

  Mode mode_ = Mode::kUndecided;
  std::string pending_;
};

constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";

// What follows [TOOL_CALLS] in a mistral reply: a JSON array of {"name", "arguments"} (v3
// tokenizers), or `name[ARGS]{...}` per call, calls separated by [TOOL_CALLS] (v11 and later).
std::optional<std::vector<ParsedToolCall>> ParseMistralCalls(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return std::nullopt;
  std::vector<ParsedToolCall> calls;
  if (text[begin] == '[') {
    absl::StatusOr<Json> j = ParseStrictJson(text.substr(begin), {.max_depth = kMaxReplyDepth});
    if (!j.ok() || !j->is_array() || j->empty()) return std::nullopt;
    for (const Json& item : *j) {
      std::optional<ParsedToolCall> call =
          item.is_object() ? ParseNamedCall(item.dump(), "arguments", nullptr) : std::nullopt;
      if (!call.has_value()) return std::nullopt;
      calls.push_back(*std::move(call));
    }
    return calls;
  }
  size_t at = begin;
  while (at < text.size()) {
    const size_t args = text.find(kMistralArgs, at);
    if (args == std::string_view::npos) return std::nullopt;
    const size_t next = text.find(kMistralCalls, args);
    const std::string_view name = text.substr(at, args - at);
    const size_t json_begin = args + kMistralArgs.size();
    const std::string_view json =
        text.substr(json_begin, next == std::string_view::npos ? next : next - json_begin);
    absl::StatusOr<Json> arguments = ParseStrictJson(json, {.max_depth = kMaxReplyDepth});
    if (name.empty() || !arguments.ok()) return std::nullopt;
    calls.push_back({std::string(name), PyJsonDumps(*arguments)});
    if (next == std::string_view::npos) break;
    at = next + kMistralCalls.size();
  }
  return calls;
}

ParsedReply ParseMistral(std::string_view text) {
  const size_t first = text.find(kMistralCalls);
  if (first == std::string_view::npos) return ParsedReply{std::string(text), {}};
  std::optional<std::vector<ParsedToolCall>> calls =
      ParseMistralCalls(text.substr(first + kMistralCalls.size()));
  if (!calls.has_value()) return ParsedReply{std::string(text), {}};
  ParsedReply reply;
  if (first > 0) reply.content = std::string(text.substr(0, first));
  reply.calls = *std::move(calls);
  return reply;
}

// mistral: content until [TOOL_CALLS] (held back while it may be starting); the calls after it
// are read at the end.
class MistralStreamParser final : public ToolCallStreamParser {
 public:
  void Feed(std::string_view text, std::string* content,
            std::vector<ParsedToolCall>* calls) override {
    pending_.append(text);
    if (in_calls_) return;
    const size_t at = pending_.find(kMistralCalls);
    if (at != std::string::npos) {
      content->append(pending_, 0, at);
      pending_.erase(0, at + kMistralCalls.size());
      in_calls_ = true;
      return;
    }
    const size_t keep = PartialTagSuffix(pending_, kMistralCalls);
    content->append(pending_, 0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
  }
  void Finish(std::string* content, std::vector<ParsedToolCall>* calls) override {
    if (!in_calls_) {
      content->append(pending_);
    } else if (std::optional<std::vector<ParsedToolCall>> parsed = ParseMistralCalls(pending_)) {
      for (ParsedToolCall& call : *parsed) calls->push_back(std::move(call));
    } else {
      content->append(kMistralCalls);
      content->append(pending_);
    }
    pending_.clear();
  }

 private:
  std::string pending_;
  bool in_calls_ = false;
};

// "required": scans the array as it grows; an element ends at the ',' or ']' after it.
class RequiredStreamParser final : public ToolCallStreamParser {
 public:
  void Feed(std::string_view text, std::string* content,
            std::vector<ParsedToolCall>* calls) override {
    text_.append(text);
    for (; scanned_ < text_.size(); ++scanned_) {
      const char c = text_[scanned_];
      if (in_string_) {
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
        continue;
      }
      if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        if (++depth_ == 2) element_ = scanned_;
      } else if (c == '}' || c == ']') {
        if (--depth_ == 1 && element_ != std::string::npos) {
          const std::string_view element =
              std::string_view(text_).substr(element_, scanned_ + 1 - element_);
          if (std::optional<ParsedToolCall> call = ParseNamedCall(element, "parameters", nullptr)) {
            calls->push_back(*std::move(call));
            ++sent_;
          }
          element_ = std::string::npos;
        }
      }
    }
  }
  void Finish(std::string* content, std::vector<ParsedToolCall>* calls) override {
    if (sent_ > 0) return;
    if (std::optional<std::vector<ParsedToolCall>> all = ParseRequiredToolCalls(text_)) {
      for (ParsedToolCall& call : *all) calls->push_back(std::move(call));
    } else {
      content->append(text_);
    }
  }

 private:
  std::string text_;
  size_t scanned_ = 0;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  size_t element_ = std::string::npos;  // where the element being scanned starts
  int sent_ = 0;
};

}  // namespace

std::unique_ptr<ToolCallStreamParser> NewRequiredStreamParser() {
  return std::make_unique<RequiredStreamParser>();
}

std::optional<ToolCallFormat> ToolCallFormatNamed(std::string_view name) {
  if (name == "hermes") return ToolCallFormat::kHermes;
  if (name == "llama3_json") return ToolCallFormat::kLlama3Json;
  if (name == "mistral") return ToolCallFormat::kMistral;
  return std::nullopt;
}

ParsedReply ParseToolCalls(ToolCallFormat format, std::string_view text) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return ParseHermes(text);
    case ToolCallFormat::kLlama3Json:
      return ParseLlama3Json(text);
    case ToolCallFormat::kMistral:
      return ParseMistral(text);
  }
  return ParsedReply{std::string(text), {}};
}

std::unique_ptr<ToolCallStreamParser> NewToolCallStreamParser(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return std::make_unique<HermesStreamParser>();
    case ToolCallFormat::kLlama3Json:
      return std::make_unique<Llama3JsonStreamParser>();
    case ToolCallFormat::kMistral:
      return std::make_unique<MistralStreamParser>();
  }
  return nullptr;
}

std::string NewToolCallId(ToolCallFormat format) {
  thread_local absl::BitGen gen;
  if (format == ToolCallFormat::kMistral) {
    // Mistral's templates refuse other ids: 9 letters and digits.
    constexpr std::string_view kAlnum =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::string id(9, ' ');
    for (char& c : id) c = kAlnum[absl::Uniform<size_t>(gen, 0, kAlnum.size())];
    return id;
  }
  return absl::StrFormat("chatcmpl-tool-%016x%016x", absl::Uniform<uint64_t>(gen),
                         absl::Uniform<uint64_t>(gen));
}

}  // namespace pagellm
