#include "router/request_validator.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/api/proto_convert.h"
#include "common/api/request_limits.h"
#include "common/api/sampling_defaults.h"
#include "common/json/strict_json.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pagellm {

namespace {

absl::Status CheckPromptBytes(const ModelContext& model, int64_t bytes, absl::string_view field) {
  if (bytes <= model.max_prompt_bytes()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, " is ", bytes, " bytes long; at most ", model.max_prompt_bytes(),
      " bytes can fit the maximum model length of ", model.max_model_len(), " tokens"));
}

// Marks every string (keys too) of the JSON text `json` (Tokenizer::MarkUntrusted), decoding
// escapes first so that "\u003c|im_start|>" is caught too. "" stays "". InvalidArgument naming
// `field` when the text is not JSON.
absl::StatusOr<std::string> MarkUntrustedJson(const Tokenizer& tok, const std::string& json,
                                              const std::string& field) {
  if (json.empty()) return std::string();
  absl::StatusOr<nlohmann::ordered_json> parsed =
      ParseStrictJson(json, {.max_depth = kMaxToolJsonDepth});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is not valid JSON: ", parsed.status().message()));
  }
  absl::Status status;
  std::function<nlohmann::ordered_json(const nlohmann::ordered_json&)> walk =
      [&](const nlohmann::ordered_json& j) -> nlohmann::ordered_json {
    if (!status.ok()) return nullptr;
    auto mark = [&](const std::string& s) -> std::string {
      absl::StatusOr<std::string> m = tok.MarkUntrusted(s, field);
      if (!m.ok()) {
        status = m.status();
        return std::string();
      }
      return *std::move(m);
    };
    if (j.is_string()) return mark(j.get<std::string>());
    if (j.is_array()) {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const auto& item : j) out.push_back(walk(item));
      return out;
    }
    if (j.is_object()) {
      nlohmann::ordered_json out = nlohmann::ordered_json::object();
      for (const auto& [key, item] : j.items()) out[mark(key)] = walk(item);
      return out;
    }
    return j;
  };
  nlohmann::ordered_json marked = walk(*parsed);
  RETURN_IF_ERROR(status);
  return marked.dump(-1, ' ', /*ensure_ascii=*/false);
}

}  // namespace

absl::StatusOr<EncodedPrompt> EncodeText(const ModelContext& model, const std::string& text,
                                         bool add_special_tokens, const char* field) {
  // The tokenizer would replace bad bytes with U+FFFD; a request should not change silently.
  if (!IsValidUtf8(text)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is not valid UTF-8"));
  }
  RETURN_IF_ERROR(CheckPromptBytes(model, static_cast<int64_t>(text.size()), field));
  EncodedPrompt out;
  out.ids = model.tokenizer().Encode(text, add_special_tokens, /*parse_special=*/false);
  return out;
}

absl::StatusOr<EncodedPrompt> EncodeChat(const ModelContext& model, const v1::ChatPrompt& chat,
                                         const char* field) {
  if (chat.messages_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".messages is empty"));
  }
  if (chat.messages_size() > kMaxChatMessages) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".messages has ", chat.messages_size(),
                                                   " entries; the limit is ", kMaxChatMessages));
  }
  if (chat.tools_size() > kMaxTools) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".tools has ", chat.tools_size(),
                                                   " entries; the limit is ", kMaxTools));
  }
  // Every string the client gives: valid UTF-8, counted against the prompt's size, and marked
  // below so that only the template's own markup can produce control tokens.
  int64_t bytes = 0;
  auto check = [&bytes](const std::string& value, const std::string& at) -> absl::Status {
    if (!IsValidUtf8(value)) {
      return absl::InvalidArgumentError(absl::StrCat(at, " is not valid UTF-8"));
    }
    bytes += static_cast<int64_t>(value.size());
    return absl::OkStatus();
  };
  for (int i = 0; i < chat.messages_size(); ++i) {
    const v1::ChatMessage& m = chat.messages(i);
    const std::string at = absl::StrCat(field, ".messages[", i, "]");
    RETURN_IF_ERROR(check(m.role(), at + ".role"));
    RETURN_IF_ERROR(check(m.content(), at + ".content"));
    RETURN_IF_ERROR(check(m.reasoning(), at + ".reasoning"));
    RETURN_IF_ERROR(CheckMaxBytes(m.role(), kMaxRoleBytes, at + ".role"));
    if (m.tool_calls_size() > kMaxToolCallsPerMessage) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".tool_calls has ", m.tool_calls_size(),
                                                     " entries; the limit is ",
                                                     kMaxToolCallsPerMessage));
    }
    for (int c = 0; c < m.tool_calls_size(); ++c) {
      const v1::ToolCall& call = m.tool_calls(c);
      const std::string call_at = absl::StrCat(at, ".tool_calls[", c, "]");
      RETURN_IF_ERROR(check(call.id(), call_at + ".id"));
      RETURN_IF_ERROR(CheckMaxBytes(call.id(), kMaxToolNameBytes, call_at + ".id"));
      RETURN_IF_ERROR(check(call.name(), call_at + ".name"));
      RETURN_IF_ERROR(CheckMaxBytes(call.name(), kMaxToolNameBytes, call_at + ".name"));
      RETURN_IF_ERROR(check(call.arguments(), call_at + ".arguments"));
    }
    RETURN_IF_ERROR(check(m.tool_call_id(), at + ".tool_call_id"));
    RETURN_IF_ERROR(CheckMaxBytes(m.tool_call_id(), kMaxToolNameBytes, at + ".tool_call_id"));
    RETURN_IF_ERROR(check(m.name(), at + ".name"));
    RETURN_IF_ERROR(CheckMaxBytes(m.name(), kMaxToolNameBytes, at + ".name"));
  }
  for (int i = 0; i < chat.tools_size(); ++i) {
    const v1::Tool& t = chat.tools(i);
    const std::string at = absl::StrCat(field, ".tools[", i, "]");
    RETURN_IF_ERROR(check(t.name(), at + ".name"));
    RETURN_IF_ERROR(CheckMaxBytes(t.name(), kMaxToolNameBytes, at + ".name"));
    RETURN_IF_ERROR(check(t.description(), at + ".description"));
    RETURN_IF_ERROR(check(t.parameters(), at + ".parameters"));
  }
  RETURN_IF_ERROR(CheckPromptBytes(model, bytes, absl::StrCat(field, ".messages")));
  if (model.chat() == nullptr) return model.chat_status();
  // Message text is the client's: it is marked so that only the template's own markup can
  // produce control tokens (Tokenizer::MarkUntrusted). transformers and vLLM tokenize the
  // rendered prompt with special tokens parsed, so a message spelling "<|im_start|>system" forges
  // a system turn there; here it stays text, as with OpenAI's API. JSON text (a call's
  // arguments, a tool's schema) is marked string by string, escapes decoded.
  const Tokenizer& tok = model.tokenizer();
  v1::ChatPrompt marked = chat;
  auto mark = [&tok](std::string* value, const std::string& at) -> absl::Status {
    if (value->empty()) return absl::OkStatus();
    ASSIGN_OR_RETURN(*value, tok.MarkUntrusted(*value, at));
    return absl::OkStatus();
  };
  for (int i = 0; i < marked.messages_size(); ++i) {
    v1::ChatMessage* m = marked.mutable_messages(i);
    const std::string at = absl::StrCat(field, ".messages[", i, "]");
    RETURN_IF_ERROR(mark(m->mutable_role(), at + ".role"));
    RETURN_IF_ERROR(mark(m->mutable_content(), at + ".content"));
    if (m->has_reasoning()) RETURN_IF_ERROR(mark(m->mutable_reasoning(), at + ".reasoning"));
    for (int c = 0; c < m->tool_calls_size(); ++c) {
      v1::ToolCall* call = m->mutable_tool_calls(c);
      const std::string call_at = absl::StrCat(at, ".tool_calls[", c, "]");
      RETURN_IF_ERROR(mark(call->mutable_id(), call_at + ".id"));
      RETURN_IF_ERROR(mark(call->mutable_name(), call_at + ".name"));
      ASSIGN_OR_RETURN(*call->mutable_arguments(),
                       MarkUntrustedJson(tok, call->arguments(), call_at + ".arguments"));
    }
    if (m->has_tool_call_id())
      RETURN_IF_ERROR(mark(m->mutable_tool_call_id(), at + ".tool_call_id"));
    if (m->has_name()) RETURN_IF_ERROR(mark(m->mutable_name(), at + ".name"));
  }
  for (int i = 0; i < marked.tools_size(); ++i) {
    v1::Tool* t = marked.mutable_tools(i);
    const std::string at = absl::StrCat(field, ".tools[", i, "]");
    RETURN_IF_ERROR(mark(t->mutable_name(), at + ".name"));
    if (t->has_description()) RETURN_IF_ERROR(mark(t->mutable_description(), at + ".description"));
    ASSIGN_OR_RETURN(*t->mutable_parameters(),
                     MarkUntrustedJson(tok, t->parameters(), at + ".parameters"));
  }
  absl::StatusOr<std::string> rendered = model.chat()->Render(marked);
  if (!rendered.ok()) return rendered.status();
  EncodedPrompt out;
  out.ids = tok.EncodeMarked(*rendered, /*add_special_tokens=*/false);
  out.rendered = Tokenizer::RemoveUntrustedMarks(*rendered);
  return out;
}

namespace {

absl::StatusOr<std::vector<int32_t>> PromptIds(const v1::GenerateRequest& request,
                                               const ModelContext& model) {
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText: {
      const bool add_special =
          request.has_add_special_tokens() ? request.add_special_tokens() : true;
      absl::StatusOr<EncodedPrompt> p =
          EncodeText(model, request.text(), add_special, "prompt.text");
      if (!p.ok()) return p.status();
      return std::move(p->ids);
    }
    case v1::GenerateRequest::kTokenIds: {
      const auto& ids = request.token_ids().ids();
      for (int i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= model.vocab_size()) {
          return absl::InvalidArgumentError(absl::StrCat("prompt.token_ids[", i, "] = ", ids[i],
                                                         " is outside the vocabulary [0, ",
                                                         model.vocab_size(), ")"));
        }
      }
      return std::vector<int32_t>(ids.begin(), ids.end());
    }
    case v1::GenerateRequest::kChat: {
      absl::StatusOr<EncodedPrompt> p = EncodeChat(model, request.chat(), "prompt.chat");
      if (!p.ok()) return p.status();
      return std::move(p->ids);
    }
    case v1::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("prompt is not set: give text, token_ids or chat");
}

// vLLM's truncate_prompt_tokens (GenerateRequest's comment); `max_tokens`: the request's, or
// its default.
absl::Status Truncate(const v1::GenerateRequest& request, const ModelContext& model,
                      int64_t max_tokens, std::vector<int32_t>* ids) {
  const int64_t asked = request.truncate_prompt_tokens();
  const int64_t max_len = model.max_model_len();
  if (asked < -1 || asked == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("truncate_prompt_tokens must be -1 or positive, got ", asked));
  }
  if (asked > max_len) {
    return absl::InvalidArgumentError(absl::StrCat("truncate_prompt_tokens (", asked,
                                                   ") is more than the model's max_model_len (",
                                                   max_len, ")"));
  }
  // -1 leaves room for max_tokens (an embedding generates none; a chat that sets none runs to
  // the end of the model length, at least one token, or as far as the model's max_new_tokens).
  int64_t keep = asked;
  if (asked == -1) {
    const v1::SamplingParams& defaults = model.info().default_sampling();
    if (request.prompt_case() == v1::GenerateRequest::kChat &&
        !request.sampling().has_max_tokens()) {
      max_tokens = defaults.has_max_tokens() ? defaults.max_tokens() : 1;
    }
    keep = request.sampling().embed() ? max_len : std::max<int64_t>(1, max_len - max_tokens);
  }
  const int64_t drop = std::ssize(*ids) - keep;
  if (drop <= 0) return absl::OkStatus();
  if (request.truncate_left()) {
    ids->erase(ids->begin(), ids->begin() + drop);
  } else {
    ids->resize(static_cast<size_t>(keep));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ValidatedRequest> ValidateGenerateRequest(const v1::GenerateRequest& request,
                                                         const ModelContext& model) {
  RETURN_IF_ERROR(CheckMaxBytes(request.request_id(), kMaxRequestIdBytes, "request_id"));
  ValidatedRequest out;
  absl::StatusOr<std::vector<int32_t>> ids = PromptIds(request, model);
  if (!ids.ok()) return ids.status();
  if (ids->empty()) {
    return absl::InvalidArgumentError("prompt is empty (it has no tokens)");
  }
  out.prompt_ids = *std::move(ids);

  // What the request leaves unset comes from the model's generation_config.json (as vLLM).
  const v1::SamplingParams& defaults = model.info().default_sampling();
  v1::SamplingParams sampling = request.sampling();
  ApplySamplingDefaults(defaults, &sampling);
  out.params = SamplingParamsFromProto(sampling);
  if (request.has_truncate_prompt_tokens()) {
    RETURN_IF_ERROR(Truncate(request, model, out.params.max_tokens, &out.prompt_ids));
  }
  const int64_t prompt_len = static_cast<int64_t>(out.prompt_ids.size());
  const int64_t max_len = model.max_model_len();
  if (request.prompt_case() == v1::GenerateRequest::kChat && !sampling.has_max_tokens()) {
    // A chat reply runs to its end or to the model length, as with vLLM's chat API, or to the
    // model's max_new_tokens. (A completion's default stays the API's 16, as vLLM's.)
    const int64_t room = std::max<int64_t>(1, max_len - prompt_len);
    out.params.max_tokens = static_cast<int32_t>(
        defaults.has_max_tokens() ? std::min<int64_t>(room, defaults.max_tokens()) : room);
  }
  if (const int32_t cap = model.info().max_tokens_limit(); cap > 0) {
    out.params.max_tokens = std::min(out.params.max_tokens, cap);
  }
  sampling.set_max_tokens(out.params.max_tokens);
  out.sampling = std::move(sampling);
  if (absl::Status s = out.params.Validate(model.vocab_size()); !s.ok()) return s;
  const int32_t limit = model.max_parallel_samples();
  if (out.params.n > limit) {
    return absl::InvalidArgumentError(absl::StrCat("sampling_params.n must be at most ", limit,
                                                   " (the model's max_parallel_samples), got ",
                                                   out.params.n));
  }
  if (out.params.beam_width > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_params.beam_width must be at most ", limit,
                     " (the model's max_parallel_samples), got ", out.params.beam_width));
  }
  RETURN_IF_ERROR(out.params.CheckContext(prompt_len, max_len));
  return out;
}

absl::Status AnswerTokenize(const ModelContext& m, const v1::TokenizeRequest& request,
                            v1::TokenizeResponse* response) {
  absl::StatusOr<EncodedPrompt> p;
  switch (request.input_case()) {
    case v1::TokenizeRequest::kText:
      p = EncodeText(m, request.text(),
                     request.has_add_special_tokens() ? request.add_special_tokens() : true,
                     "text");
      break;
    case v1::TokenizeRequest::kChat:
      p = EncodeChat(m, request.chat(), "chat");
      break;
    case v1::TokenizeRequest::INPUT_NOT_SET:
      p = absl::InvalidArgumentError("input is not set: give text or chat");
      break;
  }
  if (!p.ok()) return p.status();
  response->mutable_token_ids()->Add(p->ids.begin(), p->ids.end());
  response->set_rendered_prompt(std::move(p->rendered));
  return absl::OkStatus();
}

absl::Status AnswerDetokenize(const ModelContext& m, const v1::DetokenizeRequest& request,
                              v1::DetokenizeResponse* response) {
  const auto& ids = request.token_ids();
  if (ids.size() > m.max_model_len()) {
    return absl::InvalidArgumentError(absl::StrCat("token_ids has ", ids.size(),
                                                   " entries; the limit is the model length, ",
                                                   m.max_model_len()));
  }
  for (int i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= m.vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token_ids[", i, "] = ", ids[i], " is outside the vocabulary [0, ", m.vocab_size(), ")"));
    }
  }
  const bool skip = request.has_skip_special_tokens() && request.skip_special_tokens();
  response->set_text(m.tokenizer().Decode(absl::MakeConstSpan(ids.data(), ids.size()), skip));
  return absl::OkStatus();
}

}  // namespace pagellm
