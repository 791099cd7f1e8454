#include "router/http/tool_calls.h"

#include <cstdint>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_format.h"
#include "common/json/strict_json.h"

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

// One hermes block's JSON: {"name": string, "arguments": value}.
std::optional<ParsedToolCall> ParseHermesBlock(std::string_view block) {
  absl::StatusOr<Json> j = ParseStrictJson(block, {.max_depth = kMaxReplyDepth});
  if (!j.ok() || !j->is_object()) return std::nullopt;
  auto name = j->find("name");
  auto arguments = j->find("arguments");
  if (name == j->end() || !name->is_string() || arguments == j->end()) return std::nullopt;
  return ParsedToolCall{name->get<std::string>(), PyJsonDumps(*arguments)};
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

HermesReply ParseHermesToolCalls(std::string_view text) {
  HermesReply reply;
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
    std::optional<ParsedToolCall> call = ParseHermesBlock(block);
    if (!call.has_value()) return HermesReply{std::string(text), {}};
    reply.calls.push_back(*std::move(call));
    if (close == std::string_view::npos) break;
    at = text.find(kHermesOpen, close + kHermesClose.size());
  }
  if (first > 0) reply.content = std::string(text.substr(0, first));
  return reply;
}

void HermesStreamParser::Feed(std::string_view text, std::string* content,
                              std::vector<ParsedToolCall>* calls) {
  pending_.append(text);
  Drain(/*at_end=*/false, content, calls);
}

void HermesStreamParser::Finish(std::string* content, std::vector<ParsedToolCall>* calls) {
  Drain(/*at_end=*/true, content, calls);
}

void HermesStreamParser::Drain(bool at_end, std::string* content,
                               std::vector<ParsedToolCall>* calls) {
  while (!pending_.empty()) {
    if (!in_call_) {
      const size_t open = pending_.find(kHermesOpen);
      size_t plain = open;  // pending_[0, plain) is text outside any block
      if (open == std::string::npos) {
        plain = pending_.size();
        if (!at_end) {
          // Keep a tail that may still become "<tool_call>".
          for (size_t keep = std::min(pending_.size(), kHermesOpen.size() - 1); keep > 0; --keep) {
            if (std::string_view(pending_).substr(pending_.size() - keep) ==
                kHermesOpen.substr(0, keep)) {
              plain = pending_.size() - keep;
              break;
            }
          }
        }
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
    if (std::optional<ParsedToolCall> call = ParseHermesBlock(block)) {
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

std::string NewToolCallId() {
  thread_local absl::BitGen gen;
  return absl::StrFormat("chatcmpl-tool-%016x%016x", absl::Uniform<uint64_t>(gen),
                         absl::Uniform<uint64_t>(gen));
}

}  // namespace pagellm
