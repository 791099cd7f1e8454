// JSON is built with nlohmann (ordered, so fields come in OpenAI's order) and dumped with
// invalid UTF-8 replaced: a token's piece may be part of a character.
#include "router/http/openai_response.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;

std::string Dump(const Json& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

const char* FinishReasonName(v1::FinishReason r) {
  switch (r) {
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_ABORT:
      return "abort";
    default:
      return "";
  }
}

Json Bytes(std::string_view piece) {
  Json a = Json::array();
  for (unsigned char c : piece) a.push_back(static_cast<int>(c));
  return a;
}

const char* ErrorType(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// The completions API's `logprobs`: four parallel lists, appended to by the functions below.
Json EmptyCompletionLogprobs() {
  return {{"text_offset", Json::array()},
          {"token_logprobs", Json::array()},
          {"tokens", Json::array()},
          {"top_logprobs", Json::array()}};
}

// A token without a logprob (a prompt's first token), as vLLM lists it: nulls.
void AppendUnscored(const Tokenizer& tokenizer, int32_t id, int64_t* text_offset, Json* lists) {
  const std::string_view piece = tokenizer.TokenPiece(id);
  (*lists)["text_offset"].push_back(*text_offset);
  *text_offset += static_cast<int64_t>(piece.size());
  (*lists)["token_logprobs"].push_back(nullptr);
  (*lists)["tokens"].push_back(piece);
  (*lists)["top_logprobs"].push_back(nullptr);
}

// `text_offset` advances past each token's text.
template <typename Tokens>
void AppendCompletionLogprobs(const Tokenizer& tokenizer, const Tokens& tokens,
                              int64_t* text_offset, Json* lists) {
  Json& offsets = (*lists)["text_offset"];
  Json& values = (*lists)["token_logprobs"];
  Json& pieces = (*lists)["tokens"];
  Json& tops = (*lists)["top_logprobs"];
  for (const v1::TokenLogprob& t : tokens) {
    const std::string_view piece = tokenizer.TokenPiece(t.token_id());
    offsets.push_back(*text_offset);
    *text_offset += static_cast<int64_t>(piece.size());
    values.push_back(t.logprob());
    pieces.push_back(piece);
    // The chosen token and the N best, as vLLM lists them.
    Json top = Json::object();
    for (const v1::TopLogprob& alt : t.top()) {
      top[std::string(tokenizer.TokenPiece(alt.token_id()))] = alt.logprob();
    }
    top[std::string(piece)] = t.logprob();
    tops.push_back(std::move(top));
  }
}

// vLLM's `prompt_logprobs`: null for the first token, then per token {"<id>": {"logprob",
// "rank", "decoded_token"}} for the prompt's token and the N best.
Json PromptLogprobsJson(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                        const std::vector<v1::TokenLogprob>& logprobs) {
  Json list = Json::array();
  if (ids.empty()) return list;
  list.push_back(nullptr);
  for (const v1::TokenLogprob& t : logprobs) {
    Json entry = Json::object();
    entry[std::to_string(t.token_id())] = {{"logprob", t.logprob()},
                                           {"rank", t.rank()},
                                           {"decoded_token", tokenizer.TokenPiece(t.token_id())}};
    for (int i = 0; i < t.top_size(); ++i) {
      const v1::TopLogprob& alt = t.top(i);
      const std::string key = std::to_string(alt.token_id());
      if (entry.contains(key)) continue;
      entry[key] = {{"logprob", alt.logprob()},
                    {"rank", i + 1},
                    {"decoded_token", tokenizer.TokenPiece(alt.token_id())}};
    }
    list.push_back(std::move(entry));
  }
  return list;
}

// The `logprobs` of a choice for `tokens`: chat {"content": [...]}, completions the four
// parallel lists; `text_offset` (completions) advances past each token's text.
template <typename Tokens>
Json LogprobsJson(const Tokenizer& tokenizer, bool chat, const Tokens& tokens,
                  int64_t* text_offset) {
  if (chat) {
    Json content = Json::array();
    for (const v1::TokenLogprob& t : tokens) {
      const std::string_view piece = tokenizer.TokenPiece(t.token_id());
      Json top = Json::array();
      for (const v1::TopLogprob& alt : t.top()) {
        const std::string_view p = tokenizer.TokenPiece(alt.token_id());
        top.push_back({{"token", p}, {"logprob", alt.logprob()}, {"bytes", Bytes(p)}});
      }
      content.push_back({{"token", piece},
                         {"logprob", t.logprob()},
                         {"bytes", Bytes(piece)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  Json lists = EmptyCompletionLogprobs();
  AppendCompletionLogprobs(tokenizer, tokens, text_offset, &lists);
  return lists;
}

// Echo with logprobs: the prompt's tokens (the first unscored) lead a choice's logprobs.
Json LeadingPromptLogprobs(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                           const std::vector<v1::TokenLogprob>& logprobs, int64_t* text_offset) {
  Json lists = EmptyCompletionLogprobs();
  if (!ids.empty()) AppendUnscored(tokenizer, ids.front(), text_offset, &lists);
  AppendCompletionLogprobs(tokenizer, logprobs, text_offset, &lists);
  return lists;
}

}  // namespace

OpenAiResponse::OpenAiResponse(Config config, const Tokenizer* tokenizer)
    : config_(std::move(config)),
      tokenizer_(tokenizer),
      prefix_(MakePrefix()),
      choices_(static_cast<size_t>(config_.prompts) * config_.n),
      prompt_info_(static_cast<size_t>(config_.prompts)) {}

std::string OpenAiResponse::MakePrefix() const {
  // The fields every chunk and body starts with, less the closing brace.
  const bool chat = config_.kind == OpenAiRequest::Kind::kChat;
  Json j;
  j["id"] = config_.id;
  j["object"] = chat ? "chat.completion.chunk" : "text_completion";
  j["created"] = config_.created;
  j["model"] = config_.model;
  std::string s = Dump(j);
  s.pop_back();
  return s;
}

void OpenAiResponse::AppendStart(std::string* out) {
  if (config_.kind != OpenAiRequest::Kind::kChat) return;
  for (size_t i = 0; i < choices_.size(); ++i) {
    Json choice;
    choice["index"] = i;
    choice["delta"] = {{"role", "assistant"}, {"content", ""}};
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = nullptr;
    absl::StrAppend(out, "data: ", prefix_, ",\"choices\":[", Dump(choice), "]}\n\n");
  }
}

void OpenAiResponse::AppendChunk(int index, std::string_view text, const v1::SampleDelta* delta,
                                 const Prompt* lead, std::string* out) {
  // Per token on the streaming path: the chunk is assembled around the escaped text, with no
  // JSON tree; only logprobs (asked for) go through one.
  const bool chat = config_.kind == OpenAiRequest::Kind::kChat;
  Choice& c = choices_[index];
  absl::StrAppend(out, "data: ", prefix_, ",\"choices\":[{\"index\":", index);
  if (chat) {
    if (text.empty()) {
      out->append(",\"delta\":{}");
    } else {
      absl::StrAppend(out, ",\"delta\":{\"content\":", Dump(Json(text)), "}");
    }
  } else {
    absl::StrAppend(out, ",\"text\":", Dump(Json(text)));
  }
  out->append(",\"logprobs\":");
  const bool delta_logprobs = delta != nullptr && delta->logprobs_size() > 0 && !config_.echo_only;
  if (config_.logprobs.has_value() && lead != nullptr) {
    Json lists = LeadingPromptLogprobs(*tokenizer_, lead->ids, lead->logprobs, &c.text_offset);
    if (delta_logprobs) {
      AppendCompletionLogprobs(*tokenizer_, delta->logprobs(), &c.text_offset, &lists);
    }
    out->append(Dump(lists));
  } else if (config_.logprobs.has_value() && delta_logprobs) {
    out->append(Dump(LogprobsJson(*tokenizer_, chat, delta->logprobs(), &c.text_offset)));
  } else {
    out->append("null");
  }
  out->append(",\"finish_reason\":");
  if (c.finish_reason.empty()) {
    out->append("null");
  } else {
    absl::StrAppend(out, "\"", c.finish_reason, "\"");
  }
  absl::StrAppend(out, TakeChoiceIds(index), "}]", TakeChatPromptIds(index), "}\n\n");
}

namespace {

// ",\"<key>\":[ids...]".
std::string IdsField(absl::string_view key, absl::Span<const int32_t> ids) {
  return absl::StrCat(",\"", key, "\":[", absl::StrJoin(ids, ","), "]");
}

}  // namespace

std::string OpenAiResponse::TakeChoiceIds(int index) {
  if (!config_.return_token_ids) return "";
  Choice& c = choices_[index];
  std::string s = IdsField("token_ids", absl::MakeConstSpan(c.token_ids).subspan(c.ids_streamed));
  c.ids_streamed = c.token_ids.size();
  if (config_.kind != OpenAiRequest::Kind::kChat && !c.prompt_ids_streamed) {
    c.prompt_ids_streamed = true;
    absl::StrAppend(&s, IdsField("prompt_token_ids", prompt_info_[index / config_.n].ids));
  }
  return s;
}

std::string OpenAiResponse::TakeChatPromptIds(int index) {
  if (!config_.return_token_ids || config_.kind != OpenAiRequest::Kind::kChat) return "";
  Prompt& info = prompt_info_[index / config_.n];
  if (info.ids_streamed || info.ids.empty()) return "";
  info.ids_streamed = true;
  return IdsField("prompt_token_ids", info.ids);
}

void OpenAiResponse::Append(int prompt, const v1::GenerateResponse& response, std::string* out) {
  if (prompt < 0 || prompt >= config_.prompts) return;
  Prompt& info = prompt_info_[prompt];
  if (response.prompt_token_ids_size() > 0) {
    info.ids.assign(response.prompt_token_ids().begin(), response.prompt_token_ids().end());
  }
  info.logprobs.insert(info.logprobs.end(), response.prompt_logprobs().begin(),
                       response.prompt_logprobs().end());
  for (const v1::SampleDelta& d : response.deltas()) {
    if (d.sample_index() < 0 || d.sample_index() >= config_.n) continue;
    const int index = prompt * config_.n + d.sample_index();
    Choice& c = choices_[index];
    if (config_.return_token_ids && !config_.echo_only) {
      c.token_ids.insert(c.token_ids.end(), d.token_ids().begin(), d.token_ids().end());
    }
    if (d.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      c.finish_reason = FinishReasonName(d.finish_reason());
    }
    // echo with max_tokens 0: the generated token is dropped.
    std::string_view text = config_.echo_only ? std::string_view() : d.text();
    std::string echoed;
    const Prompt* lead = nullptr;
    if (!c.echoed && !config_.echo.empty()) {
      c.echoed = true;
      echoed = absl::StrCat(config_.echo[prompt], absl::string_view(text.data(), text.size()));
      text = echoed;
      if (config_.echo_logprobs) {
        lead = &info;  // the offsets count the prompt's tokens
      } else {
        c.text_offset = static_cast<int64_t>(config_.echo[prompt].size());
      }
    }
    std::string answer;  // streamed with a reasoning format: the part after the reasoning
    if (out != nullptr && config_.reasoning) {
      if (c.splitter == nullptr) {
        c.splitter = std::make_unique<ReasoningStreamSplitter>();
      }
      std::string reasoning;
      c.splitter->Feed(text, &reasoning, &answer);
      if (!c.finish_reason.empty()) c.splitter->Finish(&reasoning, &answer);
      if (!reasoning.empty()) {
        AppendDeltaChunk(index, {{"reasoning", reasoning}, {"reasoning_content", reasoning}},
                         nullptr, "", out);
      }
      text = answer;
    }
    if (out != nullptr && config_.kind == OpenAiRequest::Kind::kChat &&
        config_.tool_choice.mode != ToolChoice::Mode::kNone) {
      AppendToolChunks(index, text, d, out);
    } else if (out != nullptr) {
      if (!text.empty() || !c.finish_reason.empty() || d.logprobs_size() > 0 || lead != nullptr) {
        AppendChunk(index, text, &d, lead, out);
      }
    } else {
      c.text.append(text);
      if (!config_.echo_only) {
        for (const v1::TokenLogprob& t : d.logprobs()) c.logprobs.push_back(t);
      }
    }
  }
  if (response.finished()) {
    prompt_tokens_ += response.usage().prompt_tokens();
    if (!config_.echo_only) completion_tokens_ += response.usage().completion_tokens();
  }
}

void OpenAiResponse::Reset(int prompt) {
  if (prompt < 0 || prompt >= config_.prompts) return;
  for (int s = 0; s < config_.n; ++s) choices_[prompt * config_.n + s] = Choice{};
  prompt_info_[prompt] = Prompt{};
}

std::string OpenAiResponse::FinishWithCalls(const std::string& finish_reason, bool has_calls) {
  return has_calls && finish_reason == "stop" ? std::string("tool_calls") : finish_reason;
}

Json OpenAiResponse::CallJson(int k, const ParsedToolCall& call) const {
  return {
      {"index", k},
      {"id", config_.tool_call_id ? config_.tool_call_id() : NewToolCallId(config_.tool_format)},
      {"type", "function"},
      {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

void OpenAiResponse::AppendDeltaChunk(int index, const Json& delta, const v1::SampleDelta* logprobs,
                                      std::string_view finish, std::string* out) {
  Choice& c = choices_[index];
  Json choice;
  choice["index"] = index;
  choice["delta"] = delta;
  if (config_.logprobs.has_value() && logprobs != nullptr && logprobs->logprobs_size() > 0) {
    choice["logprobs"] =
        LogprobsJson(*tokenizer_, /*chat=*/true, logprobs->logprobs(), &c.text_offset);
  } else {
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = finish.empty() ? Json() : Json(finish);
  std::string text = Dump(choice);
  text.pop_back();  // the closing brace: the ids go in first
  absl::StrAppend(out, "data: ", prefix_, ",\"choices\":[", text, TakeChoiceIds(index), "}]",
                  TakeChatPromptIds(index), "}\n\n");
}

void OpenAiResponse::AppendToolChunks(int index, std::string_view text, const v1::SampleDelta& d,
                                      std::string* out) {
  Choice& c = choices_[index];
  const bool finished = !c.finish_reason.empty();
  std::vector<Json> deltas;
  const auto add_calls = [&](const std::vector<ParsedToolCall>& parsed) {
    for (const ParsedToolCall& call : parsed) {
      if (!config_.tool_choice.parallel_tool_calls && c.calls_sent > 0) break;
      deltas.push_back({{"tool_calls", Json::array({CallJson(c.calls_sent++, call)})}});
    }
  };
  switch (config_.tool_choice.mode) {
    case ToolChoice::Mode::kNamed:
      if (!text.empty()) {
        Json call = {{"index", 0}};
        if (c.calls_sent == 0) {
          call = CallJson(0, {config_.tool_choice.name, std::string(text)});
          c.calls_sent = 1;
        } else {
          call["function"] = {{"arguments", text}};
        }
        deltas.push_back({{"tool_calls", Json::array({std::move(call)})}});
      }
      break;
    case ToolChoice::Mode::kRequired:
    case ToolChoice::Mode::kAuto: {
      std::string content;
      std::vector<ParsedToolCall> parsed;
      if (c.parser == nullptr) {
        c.parser = config_.tool_choice.mode == ToolChoice::Mode::kRequired
                       ? NewRequiredStreamParser()
                       : NewToolCallStreamParser(config_.tool_format);
      }
      c.parser->Feed(text, &content, &parsed);
      if (finished) c.parser->Finish(&content, &parsed);
      if (!content.empty()) deltas.push_back({{"content", std::move(content)}});
      add_calls(parsed);
      break;
    }
    case ToolChoice::Mode::kNone:
      break;
  }
  const std::string finish =
      finished ? FinishWithCalls(c.finish_reason, c.calls_sent > 0) : std::string();
  if (deltas.empty() && (finished || d.logprobs_size() > 0)) deltas.push_back(Json::object());
  for (size_t i = 0; i < deltas.size(); ++i) {
    const bool last = i + 1 == deltas.size();
    AppendDeltaChunk(index, deltas[i], last ? &d : nullptr, last ? finish : std::string_view(),
                     out);
  }
}

void OpenAiResponse::AppendError(const absl::Status& status, std::string* out) {
  absl::StrAppend(out, "data: ", OpenAiErrorBody(status), "\n\n");
}

void OpenAiResponse::AppendEnd(std::string* out) {
  if (config_.include_usage) {
    Json usage = {{"prompt_tokens", prompt_tokens_},
                  {"completion_tokens", completion_tokens_},
                  {"total_tokens", prompt_tokens_ + completion_tokens_}};
    absl::StrAppend(out, "data: ", prefix_, ",\"choices\":[],\"usage\":", Dump(usage), "}\n\n");
  }
  out->append("data: [DONE]\n\n");
}

std::string OpenAiResponse::Body() const {
  const bool chat = config_.kind == OpenAiRequest::Kind::kChat;
  Json j;
  j["id"] = config_.id;
  j["object"] = chat ? "chat.completion" : "text_completion";
  j["created"] = config_.created;
  j["model"] = config_.model;
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    Json choice;
    choice["index"] = i;
    std::string finish_reason = c.finish_reason;
    std::optional<ReasoningSplit> split;
    if (chat && config_.reasoning) split = SplitReasoning(c.text);
    if (chat && (split.has_value() || config_.tool_choice.mode != ToolChoice::Mode::kNone)) {
      ToolReply reply;
      if (config_.tool_choice.mode != ToolChoice::Mode::kNone) {
        reply = ReadToolReply(config_.tool_choice, config_.tool_format,
                              split.has_value() ? split->content.value_or("") : c.text);
        // A reply that is all reasoning has no answer to read calls from.
        if (split.has_value() && !split->content.has_value() && reply.calls.empty()) {
          reply.content.reset();
        }
      } else {
        reply.content = split->content;
      }
      Json message = {{"role", "assistant"},
                      {"content", reply.content.has_value() ? Json(*reply.content) : Json()}};
      if (split.has_value() && split->reasoning.has_value()) {
        message["reasoning"] = *split->reasoning;          // vLLM's name
        message["reasoning_content"] = *split->reasoning;  // DeepSeek's and older vLLM's
      }
      if (!reply.calls.empty()) {
        Json calls = Json::array();
        for (size_t k = 0; k < reply.calls.size(); ++k) {
          Json call = CallJson(static_cast<int>(k), reply.calls[k]);
          call.erase("index");
          calls.push_back(std::move(call));
        }
        message["tool_calls"] = std::move(calls);
      }
      finish_reason = FinishWithCalls(finish_reason, !reply.calls.empty());
      choice["message"] = std::move(message);
    } else if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    const Prompt& info = prompt_info_[i / config_.n];
    if (config_.logprobs.has_value() && config_.echo_logprobs) {
      int64_t offset = 0;  // the prompt's tokens come first
      Json lists = LeadingPromptLogprobs(*tokenizer_, info.ids, info.logprobs, &offset);
      AppendCompletionLogprobs(*tokenizer_, c.logprobs, &offset, &lists);
      choice["logprobs"] = std::move(lists);
    } else if (config_.logprobs.has_value()) {
      // Offsets count from the start of the choice's text, echo included.
      int64_t offset =
          config_.echo.empty() ? 0 : static_cast<int64_t>(config_.echo[i / config_.n].size());
      choice["logprobs"] = LogprobsJson(*tokenizer_, chat, c.logprobs, &offset);
    } else {
      choice["logprobs"] = nullptr;
    }
    choice["finish_reason"] = finish_reason.empty() ? Json(nullptr) : Json(finish_reason);
    if (!chat && config_.prompt_logprobs.has_value()) {
      choice["prompt_logprobs"] = PromptLogprobsJson(*tokenizer_, info.ids, info.logprobs);
    }
    if (config_.return_token_ids) {
      choice["token_ids"] = c.token_ids;
      if (!chat) choice["prompt_token_ids"] = info.ids;
    }
    choices.push_back(std::move(choice));
  }
  j["choices"] = std::move(choices);
  if (chat && config_.return_token_ids) j["prompt_token_ids"] = prompt_info_.front().ids;
  if (chat && config_.prompt_logprobs.has_value()) {  // vLLM: on the response
    j["prompt_logprobs"] =
        PromptLogprobsJson(*tokenizer_, prompt_info_.front().ids, prompt_info_.front().logprobs);
  }
  j["usage"] = {{"prompt_tokens", prompt_tokens_},
                {"completion_tokens", completion_tokens_},
                {"total_tokens", prompt_tokens_ + completion_tokens_}};
  return Dump(j);
}

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string OpenAiErrorBody(int http_status, std::string_view message, std::string_view param,
                            std::string_view code) {
  Json error;
  error["message"] = message;
  error["type"] = ErrorType(http_status);
  error["param"] = param.empty() ? Json(nullptr) : Json(param);
  error["code"] = code.empty() ? Json(nullptr) : Json(code);
  Json j;
  j["error"] = std::move(error);
  return Dump(j);
}

std::string OpenAiErrorBody(const absl::Status& status) {
  return OpenAiErrorBody(HttpStatusFor(status.code()), std::string(status.message()),
                         OpenAiParam(status),
                         absl::AsciiStrToLower(absl::StatusCodeToString(status.code())));
}

}  // namespace pagellm
