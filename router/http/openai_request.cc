// JSON null counts as absent everywhere (clients send `"stop": null` for "no value"). Integer
// fields take JSON numbers with an integral value (2.0 too, as pydantic does for vLLM); number
// fields take any finite number.
#include "router/http/openai_request.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/json/strict_json.h"
#include "common/sampling/sampling_params.h"
#include "common/status_macros.h"
#include "router/http/openai_tools.h"

namespace pagellm {
namespace {

using openai::CheckKnownFields;
using openai::Error;
using openai::Field;
using openai::FieldSet;
using openai::GetBool;
using openai::GetFloat;
using openai::GetInt;
using openai::GetInt32;
using openai::GetString;
using openai::Json;
using openai::WrongType;

// The fields ParseCommonSampling reads, which both endpoints take.
constexpr const char* kSamplingFields =
    "model temperature top_p top_k min_p repetition_penalty presence_penalty frequency_penalty "
    "seed min_tokens ignore_eos include_stop_str_in_output skip_special_tokens n stop "
    "stop_token_ids stream stream_options user logit_bias allowed_token_ids prompt_logprobs "
    "priority response_format use_beam_search length_penalty early_stopping cache_salt "
    "truncate_prompt_tokens truncation_side return_token_ids "
    "structured_outputs guided_json guided_choice guided_regex guided_grammar "
    "guided_decoding_backend guided_whitespace_pattern";

// Field names, from space-separated lists.

// A JSON Schema given as an object (or, for vLLM's guided_json, as JSON text too), serialized
// for the worker in its own key order (properties are generated in that order).
absl::Status SetJsonSchema(const Json& schema, absl::string_view field, v1::StructuredOutput* so) {
  std::string text;
  if (schema.is_object() || schema.is_boolean()) {
    text = schema.dump();
  } else if (schema.is_string()) {
    text = schema.get<std::string>();
  } else {
    return Error(field, absl::StrCat(field, " must be a JSON Schema object"));
  }
  if (text.size() > static_cast<size_t>(kMaxStructuredBytes)) {
    return Error(field, absl::StrCat(field, " is ", text.size(), " bytes; the limit is ",
                                     kMaxStructuredBytes));
  }
  so->set_json_schema(std::move(text));
  return absl::OkStatus();
}

// A regex or a GBNF grammar: text within kMaxStructuredBytes.
absl::StatusOr<std::string> StructuredText(const Json& text, absl::string_view field) {
  if (!text.is_string()) return WrongType(field, text, "a string");
  if (text.get_ref<const std::string&>().size() > static_cast<size_t>(kMaxStructuredBytes)) {
    return Error(field, absl::StrCat(field, " is ", text.get_ref<const std::string&>().size(),
                                     " bytes; the limit is ", kMaxStructuredBytes));
  }
  return text.get<std::string>();
}

absl::Status SetRegex(const Json& regex, absl::string_view field, v1::StructuredOutput* so) {
  ASSIGN_OR_RETURN(std::string text, StructuredText(regex, field));
  so->set_regex(std::move(text));
  return absl::OkStatus();
}

absl::Status SetGrammar(const Json& grammar, absl::string_view field, v1::StructuredOutput* so) {
  ASSIGN_OR_RETURN(std::string text, StructuredText(grammar, field));
  so->set_grammar(std::move(text));
  return absl::OkStatus();
}

absl::Status SetChoice(const Json& choice, absl::string_view field, v1::StructuredOutput* so) {
  if (!choice.is_array() || choice.empty() || choice.size() > static_cast<size_t>(kMaxChoices)) {
    return Error(field, absl::StrCat(field, " must be a list of 1 to ", kMaxChoices, " strings"));
  }
  for (const Json& c : choice) {
    if (!c.is_string()) return Error(field, absl::StrCat(field, " must be a list of strings"));
    so->mutable_choice()->add_values(c.get<std::string>());
  }
  return absl::OkStatus();
}

// Structured output, from whichever of OpenAI's response_format, vLLM's structured_outputs or
// its older guided_json / guided_choice the request uses (at most one constraint).
absl::Status ParseStructuredOutput(const Json& j, v1::SamplingParams* s) {
  if (Field(j, "guided_whitespace_pattern") != nullptr) {
    return Error("guided_whitespace_pattern",
                 "guided_whitespace_pattern is not supported (JSON output allows runs of at most "
                 "16 whitespace bytes between tokens)");
  }
  if (const Json* backend = Field(j, "guided_decoding_backend");
      backend != nullptr && !backend->is_string()) {
    return WrongType("guided_decoding_backend", *backend, "a string");
  }
  v1::StructuredOutput so;
  std::vector<std::string> given;
  if (const Json* format = Field(j, "response_format")) {
    const Json* type = format->is_object() ? Field(*format, "type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      return Error("response_format", "response_format must be an object with a type");
    }
    if (*type == "json_object") {
      so.set_json_object(true);
      given.push_back("response_format");
    } else if (*type == "json_schema") {
      const Json* js = Field(*format, "json_schema");
      const Json* schema = js != nullptr && js->is_object() ? Field(*js, "schema") : nullptr;
      if (schema == nullptr) {
        return Error("response_format",
                     "response_format json_schema needs json_schema.schema (a JSON Schema)");
      }
      RETURN_IF_ERROR(SetJsonSchema(*schema, "response_format.json_schema.schema", &so));
      given.push_back("response_format");
    } else if (*type != "text") {
      return Error("response_format",
                   "response_format type must be text, json_object or "
                   "json_schema");
    }
  }
  if (const Json* so_field = Field(j, "structured_outputs")) {
    if (!so_field->is_object()) return WrongType("structured_outputs", *so_field, "an object");
    for (const auto& [key, value] : so_field->items()) {
      if (key == "json") {
        RETURN_IF_ERROR(SetJsonSchema(value, "structured_outputs.json", &so));
      } else if (key == "choice") {
        RETURN_IF_ERROR(SetChoice(value, "structured_outputs.choice", &so));
      } else if (key == "regex") {
        RETURN_IF_ERROR(SetRegex(value, "structured_outputs.regex", &so));
      } else if (key == "grammar") {
        RETURN_IF_ERROR(SetGrammar(value, "structured_outputs.grammar", &so));
      } else if (key == "json_object") {
        if (!value.is_boolean())
          return WrongType("structured_outputs.json_object", value, "a boolean");
        if (!value.get<bool>()) continue;
        so.set_json_object(true);
      } else if (key == "disable_fallback") {
        continue;  // pagellm has one implementation: nothing to fall back to
      } else {
        return Error("structured_outputs",
                     absl::StrCat("structured_outputs.", key,
                                  " is not supported (json, choice, json_object, regex and "
                                  "grammar are)"));
      }
      given.push_back(absl::StrCat("structured_outputs.", key));
    }
  }
  if (const Json* v = Field(j, "guided_json")) {
    RETURN_IF_ERROR(SetJsonSchema(*v, "guided_json", &so));
    given.push_back("guided_json");
  }
  if (const Json* v = Field(j, "guided_choice")) {
    RETURN_IF_ERROR(SetChoice(*v, "guided_choice", &so));
    given.push_back("guided_choice");
  }
  if (const Json* v = Field(j, "guided_regex")) {
    RETURN_IF_ERROR(SetRegex(*v, "guided_regex", &so));
    given.push_back("guided_regex");
  }
  if (const Json* v = Field(j, "guided_grammar")) {
    RETURN_IF_ERROR(SetGrammar(*v, "guided_grammar", &so));
    given.push_back("guided_grammar");
  }
  if (given.size() > 1) {
    return Error(given[1], absl::StrCat("only one structured output constraint may be given: ",
                                        absl::StrJoin(given, " and ")));
  }
  if (!given.empty()) *s->mutable_structured_output() = std::move(so);
  return absl::OkStatus();
}

// Fields both endpoints map onto SamplingParams the same way.
absl::Status ParseCommonSampling(const Json& j, OpenAiRequest* out, v1::SamplingParams* s) {
  RETURN_IF_ERROR(ParseStructuredOutput(j, s));
  ASSIGN_OR_RETURN(auto temperature, GetFloat(j, "temperature"));
  if (temperature) s->set_temperature(*temperature);
  ASSIGN_OR_RETURN(auto top_p, GetFloat(j, "top_p"));
  if (top_p) s->set_top_p(*top_p);
  ASSIGN_OR_RETURN(auto top_k, GetInt32(j, "top_k"));
  if (top_k) s->set_top_k(*top_k);
  ASSIGN_OR_RETURN(auto min_p, GetFloat(j, "min_p"));
  if (min_p) s->set_min_p(*min_p);
  ASSIGN_OR_RETURN(auto repetition_penalty, GetFloat(j, "repetition_penalty"));
  if (repetition_penalty) s->set_repetition_penalty(*repetition_penalty);
  ASSIGN_OR_RETURN(auto presence_penalty, GetFloat(j, "presence_penalty"));
  if (presence_penalty) s->set_presence_penalty(*presence_penalty);
  ASSIGN_OR_RETURN(auto frequency_penalty, GetFloat(j, "frequency_penalty"));
  if (frequency_penalty) s->set_frequency_penalty(*frequency_penalty);
  ASSIGN_OR_RETURN(auto seed, GetInt(j, "seed"));
  if (seed) s->set_seed(static_cast<uint64_t>(*seed));  // OpenAI seeds may be negative
  ASSIGN_OR_RETURN(auto min_tokens, GetInt32(j, "min_tokens"));
  if (min_tokens) s->set_min_tokens(*min_tokens);
  ASSIGN_OR_RETURN(auto ignore_eos, GetBool(j, "ignore_eos"));
  if (ignore_eos) s->set_ignore_eos(*ignore_eos);
  ASSIGN_OR_RETURN(auto include_stop, GetBool(j, "include_stop_str_in_output"));
  if (include_stop) s->set_include_stop_str_in_output(*include_stop);
  ASSIGN_OR_RETURN(auto skip_special, GetBool(j, "skip_special_tokens"));
  if (skip_special) s->set_skip_special_tokens(*skip_special);
  ASSIGN_OR_RETURN(auto priority, GetInt32(j, "priority"));  // vLLM's; the router checks it
  if (priority) s->set_priority(*priority);

  ASSIGN_OR_RETURN(auto n, GetInt32(j, "n"));
  if (n) {
    if (*n < 1) return Error("n", absl::StrCat("n must be at least 1, got ", *n));
    s->set_n(*n);
    out->n = *n;
  }

  if (const Json* stop = Field(j, "stop")) {
    if (stop->is_string()) {
      s->add_stop(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (size_t i = 0; i < stop->size(); ++i) {
        const Json& e = (*stop)[i];
        if (!e.is_string()) return WrongType(absl::StrCat("stop[", i, "]"), e, "a string");
        s->add_stop(e.get<std::string>());
      }
    } else {
      return WrongType("stop", *stop, "a string or an array of strings");
    }
  }
  if (const Json* ids = Field(j, "stop_token_ids")) {
    if (!ids->is_array()) return WrongType("stop_token_ids", *ids, "an array of integers");
    for (size_t i = 0; i < ids->size(); ++i) {
      const Json& e = (*ids)[i];
      if (!e.is_number_integer() || e.get<int64_t>() < 0 ||
          e.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return Error(absl::StrCat("stop_token_ids[", i, "]"),
                     absl::StrCat("stop_token_ids[", i, "] must be a token id"));
      }
      s->add_stop_token_ids(static_cast<int32_t>(e.get<int64_t>()));
    }
  }

  ASSIGN_OR_RETURN(auto stream, GetBool(j, "stream"));
  out->stream = stream.value_or(false);
  if (const Json* options = Field(j, "stream_options")) {
    if (!options->is_object()) return WrongType("stream_options", *options, "an object");
    if (!out->stream) {
      return Error("stream_options", "stream_options is only allowed when stream is true");
    }
    if (absl::Status st = CheckKnownFields(*options, {"include_usage", "continuous_usage_stats"},
                                           "stream_options");
        !st.ok()) {
      return st;
    }
    ASSIGN_OR_RETURN(auto include_usage, GetBool(*options, "include_usage"));
    out->include_usage = include_usage.value_or(false);
    ASSIGN_OR_RETURN(auto continuous, GetBool(*options, "continuous_usage_stats"));
    if (continuous.value_or(false)) {
      return Error("stream_options.continuous_usage_stats",
                   "stream_options.continuous_usage_stats is not supported");
    }
  }

  ASSIGN_OR_RETURN(auto prompt_logprobs, GetInt32(j, "prompt_logprobs"));
  if (prompt_logprobs) {
    if (*prompt_logprobs < 0 || *prompt_logprobs > kMaxLogprobs) {
      return Error("prompt_logprobs", absl::StrCat("prompt_logprobs must be in [0, ", kMaxLogprobs,
                                                   "], got ", *prompt_logprobs));
    }
    if (out->stream) {  // as vLLM
      return Error("prompt_logprobs", "prompt_logprobs are not available when stream is true");
    }
    s->set_prompt_logprobs(*prompt_logprobs);
    out->prompt_logprobs = *prompt_logprobs;
  }

  ASSIGN_OR_RETURN(auto model, GetString(j, "model", kMaxIdentifierBytes));
  out->model = model.value_or("");
  ASSIGN_OR_RETURN(auto user, GetString(j, "user", kMaxIdentifierBytes));
  (void)user;  // accepted for compatibility; pagellm keeps no per-user state and logs none
  // OpenAI's logit_bias: {"<token id>": bias}; vLLM's allowed_token_ids: [ids]. The worker
  // checks the ids against the vocabulary and the values' range (SamplingParams::Validate).
  if (const Json* bias = Field(j, "logit_bias"); bias != nullptr && !bias->is_null()) {
    if (!bias->is_object()) return WrongType("logit_bias", *bias, "an object");
    if (bias->size() > static_cast<size_t>(kMaxLogitBias)) {
      return Error("logit_bias", absl::StrCat("logit_bias has ", bias->size(),
                                              " entries; the limit is ", kMaxLogitBias));
    }
    for (const auto& [key, value] : bias->items()) {
      int32_t id;
      if (!absl::SimpleAtoi(key, &id) || !value.is_number()) {
        return Error("logit_bias", "logit_bias maps token ids (as strings) to numbers");
      }
      (*s->mutable_logit_bias())[id] = value.get<float>();
    }
  }
  if (const Json* ids = Field(j, "allowed_token_ids"); ids != nullptr && !ids->is_null()) {
    if (!ids->is_array() || ids->size() > static_cast<size_t>(kMaxAllowedTokenIds)) {
      return Error("allowed_token_ids", absl::StrCat("allowed_token_ids must be a list of at most ",
                                                     kMaxAllowedTokenIds, " token ids"));
    }
    for (const Json& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return Error("allowed_token_ids", "allowed_token_ids must be a list of token ids");
      }
      s->add_allowed_token_ids(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  ASSIGN_OR_RETURN(auto return_token_ids, GetBool(j, "return_token_ids"));
  out->return_token_ids = return_token_ids.value_or(false);
  ASSIGN_OR_RETURN(auto cache_salt, GetString(j, "cache_salt", kMaxCacheSaltBytes));
  if (cache_salt) {
    if (cache_salt->empty()) {  // as vLLM
      return Error("cache_salt", "cache_salt must be a non-empty string if provided");
    }
    s->set_cache_salt(*cache_salt);
  }
  // vLLM's beam search: n beams, best first, as the n choices. The model's raw log-probabilities
  // rank them, so the temperature does not apply (vLLM ignores it too). length_penalty and
  // early_stopping are ignored without it, as in vLLM.
  ASSIGN_OR_RETURN(auto beam_search, GetBool(j, "use_beam_search"));
  ASSIGN_OR_RETURN(auto length_penalty, GetFloat(j, "length_penalty"));
  ASSIGN_OR_RETURN(auto early_stopping, GetBool(j, "early_stopping"));
  if (beam_search.value_or(false)) {
    s->set_temperature(0.0f);
    s->clear_n();
    if (out->n > 1) s->set_beam_width(out->n);  // one beam is greedy decoding
    if (length_penalty) s->set_length_penalty(*length_penalty);
    if (early_stopping) s->set_early_stopping(*early_stopping);
  }
  return absl::OkStatus();
}

absl::StatusOr<Json> ParseBody(absl::string_view body) {
  StrictJsonOptions options;
  options.max_depth = kMaxJsonDepth;
  absl::StatusOr<Json> j = ParseStrictJson(std::string_view(body.data(), body.size()), options);
  if (!j.ok()) {
    return Error("", absl::StrCat("the body is not valid JSON: ", j.status().message()));
  }
  if (!j->is_object()) return Error("", "the body must be a JSON object");
  return j;
}

// prompt: a string, an array of strings, an array of token ids, or an array of such arrays.
// `field` ("prompt", or "input" for embeddings) holds at most `max_prompts` prompts.
absl::Status ParsePrompts(const Json& j, const v1::GenerateRequest& base, OpenAiRequest* out,
                          const char* field = "prompt", int max_prompts = kMaxPromptsPerRequest) {
  const Json* prompt = Field(j, field);
  if (prompt == nullptr) return Error(field, absl::StrCat(field, " is required"));
  auto add_text = [&](const Json& v) {
    out->prompts.push_back(base);
    out->prompts.back().set_text(v.get<std::string>());
  };
  auto add_ids = [&](const Json& arr, absl::string_view at) -> absl::Status {
    v1::GenerateRequest r = base;
    for (size_t i = 0; i < arr.size(); ++i) {
      const Json& e = arr[i];
      if (!e.is_number_integer() || e.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
          e.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return Error(absl::StrCat(at, "[", i, "]"),
                     absl::StrCat(at, "[", i, "] must be a token id (an integer)"));
      }
      r.mutable_token_ids()->add_ids(static_cast<int32_t>(e.get<int64_t>()));
    }
    out->prompts.push_back(std::move(r));
    return absl::OkStatus();
  };
  if (prompt->is_string()) {
    add_text(*prompt);
    return absl::OkStatus();
  }
  if (!prompt->is_array()) {
    return WrongType(field, *prompt,
                     "a string, an array of strings, an array of token ids or an array of arrays "
                     "of token ids");
  }
  if (prompt->empty()) return Error(field, absl::StrCat(field, " is an empty array"));
  const Json& first = (*prompt)[0];
  if (first.is_number()) return add_ids(*prompt, field);
  if (prompt->size() > static_cast<size_t>(max_prompts)) {
    return Error(field, absl::StrCat(field, " has ", prompt->size(), " prompts; the limit is ",
                                     max_prompts));
  }
  for (size_t i = 0; i < prompt->size(); ++i) {
    const Json& e = (*prompt)[i];
    const std::string at = absl::StrCat(field, "[", i, "]");
    if (first.is_string() && e.is_string()) {
      add_text(e);
    } else if (first.is_array() && e.is_array()) {
      if (e.empty()) return Error(at, absl::StrCat(at, " is an empty array"));
      RETURN_IF_ERROR(add_ids(e, at));
    } else {
      return WrongType(at, e, first.is_string() ? "a string" : "an array of token ids");
    }
  }
  return absl::OkStatus();
}

// A chat message's content: a string, or text parts (joined with "\n", as vLLM does).
absl::StatusOr<std::string> MessageContent(const Json& content, absl::string_view at) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  const std::string param = absl::StrCat(at, ".content");
  if (!content.is_array()) return WrongType(param, content, "a string or an array of parts");
  std::vector<std::string> texts;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string p = absl::StrCat(param, "[", i, "]");
    if (!part.is_object()) return WrongType(p, part, "an object");
    const Json* type = Field(part, "type");
    if (type == nullptr || !type->is_string()) {
      return Error(absl::StrCat(p, ".type"), absl::StrCat(p, ".type must be a string"));
    }
    if (type->get<std::string>() != "text") {
      return Error(absl::StrCat(p, ".type"),
                   absl::StrCat(p, ".type '", type->get<std::string>(),
                                "' is not supported: pagellm serves text models (parts of type "
                                "'text' only)"));
    }
    RETURN_IF_ERROR(CheckKnownFields(part, {"type", "text"}, p));
    const Json* text = Field(part, "text");
    if (text == nullptr || !text->is_string()) {
      return Error(absl::StrCat(p, ".text"), absl::StrCat(p, ".text must be a string"));
    }
    texts.push_back(text->get<std::string>());
  }
  return absl::StrJoin(texts, "\n");
}

absl::Status ParseMessages(const Json& j, v1::ChatPrompt* chat) {
  const Json* messages = Field(j, "messages");
  if (messages == nullptr) return Error("messages", "messages is required");
  if (!messages->is_array()) return WrongType("messages", *messages, "an array");
  if (messages->empty()) return Error("messages", "messages is empty");
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string at = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return WrongType(at, m, "an object");
    if (Field(m, "function_call") != nullptr) {
      return Error(absl::StrCat(at, ".function_call"),
                   absl::StrCat(at,
                                ".function_call (deprecated function calling) is not "
                                "supported; use tool_calls"));
    }
    if (absl::Status s = CheckKnownFields(
            m,
            {"role content tool_calls tool_call_id function_call name refusal reasoning "
             "reasoning_content"},
            at);
        !s.ok()) {
      return s;
    }
    const Json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) {
      return Error(absl::StrCat(at, ".role"), absl::StrCat(at, ".role must be a string"));
    }
    auto it = m.find("content");
    absl::StatusOr<std::string> content = MessageContent(it == m.end() ? Json() : *it, at);
    if (!content.ok()) return content.status();
    v1::ChatMessage* out = chat->add_messages();
    out->set_role(role->get<std::string>());
    out->set_content(*std::move(content));
    RETURN_IF_ERROR(ParseMessageToolFields(m, at, out));
  }
  return absl::OkStatus();
}

// messages, add_generation_prompt and chat_template_kwargs.
absl::Status ParseChatPrompt(const Json& j, v1::ChatPrompt* chat) {
  RETURN_IF_ERROR(ParseMessages(j, chat));
  ASSIGN_OR_RETURN(auto add_generation_prompt, GetBool(j, "add_generation_prompt"));
  if (add_generation_prompt) chat->set_add_generation_prompt(*add_generation_prompt);
  if (const Json* kwargs = Field(j, "chat_template_kwargs");
      kwargs != nullptr && !kwargs->is_null()) {
    if (!kwargs->is_object()) return WrongType("chat_template_kwargs", *kwargs, "an object");
    // The template's interpreter checks the names and bounds the values (chat_template.h).
    chat->set_chat_template_kwargs(kwargs->dump());
  }
  return absl::OkStatus();
}

// vLLM's truncate_prompt_tokens and truncation_side, into `base`.
absl::Status ParseTruncation(const Json& j, v1::GenerateRequest* base) {
  ASSIGN_OR_RETURN(auto keep, GetInt32(j, "truncate_prompt_tokens"));
  if (keep) base->set_truncate_prompt_tokens(*keep);  // the router checks the range
  ASSIGN_OR_RETURN(auto side, GetString(j, "truncation_side", kMaxIdentifierBytes));
  if (side && *side != "left" && *side != "right") {
    return Error("truncation_side", "truncation_side must be either 'left' or 'right'");
  }
  base->set_truncate_left(side == "left");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseCompletionRequest(std::string_view body_view) {
  const absl::string_view body(body_view.data(), body_view.size());
  absl::StatusOr<Json> parsed = ParseBody(body);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  static const FieldSet* const kKnown = new FieldSet(
      kSamplingFields, "prompt max_tokens logprobs echo best_of suffix add_special_tokens");
  RETURN_IF_ERROR(CheckKnownFields(j, *kKnown, ""));

  OpenAiRequest out;
  out.kind = OpenAiRequest::Kind::kCompletion;
  v1::GenerateRequest base;
  v1::SamplingParams* s = base.mutable_sampling();
  RETURN_IF_ERROR(ParseCommonSampling(j, &out, s));
  ASSIGN_OR_RETURN(auto logprobs, GetInt32(j, "logprobs"));
  if (logprobs) {
    if (*logprobs < 0) {
      return Error("logprobs", absl::StrCat("logprobs must be >= 0, got ", *logprobs));
    }
    s->set_logprobs(*logprobs);
    out.logprobs = *logprobs;
  }
  ASSIGN_OR_RETURN(auto echo, GetBool(j, "echo"));
  out.echo = echo.value_or(false);
  ASSIGN_OR_RETURN(auto max_tokens, GetInt32(j, "max_tokens"));
  if (max_tokens) s->set_max_tokens(*max_tokens);
  if (out.echo && max_tokens == 0) {
    // Only the prompt comes back (scoring it, with logprobs): one token is generated and
    // dropped, as vLLM does.
    out.echo_only = true;
    s->set_max_tokens(1);
    s->clear_min_tokens();
  }
  if (out.echo && out.logprobs.has_value()) {
    // The prompt's tokens lead each choice's logprobs (the legacy completions API).
    if (!s->has_prompt_logprobs()) s->set_prompt_logprobs(*out.logprobs);
    out.echo_logprobs = true;
  }
  ASSIGN_OR_RETURN(auto best_of, GetInt32(j, "best_of"));
  if (best_of && *best_of != out.n) {
    return Error("best_of", "best_of other than n is not supported");
  }
  ASSIGN_OR_RETURN(auto suffix, GetString(j, "suffix", kMaxIdentifierBytes));
  if (suffix && !suffix->empty()) return Error("suffix", "suffix is not supported");
  ASSIGN_OR_RETURN(auto add_special, GetBool(j, "add_special_tokens"));
  if (add_special) base.set_add_special_tokens(*add_special);
  RETURN_IF_ERROR(ParseTruncation(j, &base));
  base.set_return_prompt_token_ids(out.return_token_ids);
  if (out.echo && base.has_truncate_prompt_tokens()) {
    // The echo would be the prompt as given, not as the model saw it.
    return Error("truncate_prompt_tokens", "truncate_prompt_tokens is not supported with echo");
  }

  RETURN_IF_ERROR(ParsePrompts(j, base, &out));
  return out;
}

// The fields every embedding endpoint takes ("model", "user", and vLLM's "priority" and
// "add_special_tokens"), into `out` and the embedding request `base` its texts copy.
absl::Status ParseEmbeddingCommon(const Json& j, OpenAiRequest* out, v1::GenerateRequest* base) {
  out->kind = OpenAiRequest::Kind::kEmbedding;
  v1::SamplingParams* s = base->mutable_sampling();
  s->set_embed(true);
  s->set_max_tokens(1);  // generates nothing; only the input counts against the context
  ASSIGN_OR_RETURN(auto model, GetString(j, "model", kMaxIdentifierBytes));
  out->model = model.value_or("");
  ASSIGN_OR_RETURN(auto user, GetString(j, "user", kMaxIdentifierBytes));
  (void)user;  // as for completions: accepted, neither kept nor logged
  ASSIGN_OR_RETURN(auto priority, GetInt32(j, "priority"));  // the router checks it
  if (priority) s->set_priority(*priority);
  ASSIGN_OR_RETURN(auto add_special, GetBool(j, "add_special_tokens"));
  if (add_special) base->set_add_special_tokens(*add_special);
  return ParseTruncation(j, base);
}

absl::StatusOr<OpenAiRequest> ParseEmbeddingRequest(std::string_view body_view) {
  const absl::string_view body(body_view.data(), body_view.size());
  absl::StatusOr<Json> parsed = ParseBody(body);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  static const FieldSet* const kKnown =
      new FieldSet({"input model encoding_format dimensions user add_special_tokens priority "
                    "truncate_prompt_tokens truncation_side"});
  RETURN_IF_ERROR(CheckKnownFields(j, *kKnown, ""));
  OpenAiRequest out;
  v1::GenerateRequest base;
  RETURN_IF_ERROR(ParseEmbeddingCommon(j, &out, &base));
  ASSIGN_OR_RETURN(auto format, GetString(j, "encoding_format", kMaxIdentifierBytes));
  if (format && *format != "float" && *format != "base64") {
    return Error(
        "encoding_format",
        absl::StrCat("encoding_format must be \"float\" or \"base64\", got \"", *format, "\""));
  }
  out.base64 = format == "base64";
  if (const Json* dimensions = Field(j, "dimensions");
      dimensions != nullptr && !dimensions->is_null()) {
    return Error("dimensions",
                 "dimensions is not supported: the model has no matryoshka representation");
  }
  RETURN_IF_ERROR(ParsePrompts(j, base, &out, "input", kMaxEmbeddingInputs));
  return out;
}

absl::StatusOr<ScoreHttpRequest> ParseScoreRequest(std::string_view body_view, bool rerank) {
  const absl::string_view body(body_view.data(), body_view.size());
  absl::StatusOr<Json> parsed = ParseBody(body);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  static const FieldSet* const kScore =
      new FieldSet({"model text_1 text_2 user add_special_tokens priority "
                    "truncate_prompt_tokens truncation_side"});
  static const FieldSet* const kRerank =
      new FieldSet({"model query documents top_n user add_special_tokens priority "
                    "truncate_prompt_tokens truncation_side"});
  RETURN_IF_ERROR(CheckKnownFields(j, rerank ? *kRerank : *kScore, ""));
  ScoreHttpRequest out;
  out.rerank = rerank;
  OpenAiRequest& e = out.embed;
  v1::GenerateRequest base;
  RETURN_IF_ERROR(ParseEmbeddingCommon(j, &e, &base));
  // A field's texts: a string (when `one`), and/or a non-empty array of strings (when `many`;
  // at most kMaxEmbeddingInputs).
  auto texts = [&](const char* field, bool one,
                   bool many) -> absl::StatusOr<std::vector<std::string>> {
    const Json* v = Field(j, field);
    if (v == nullptr) return Error(field, absl::StrCat(field, " is required"));
    if (one && v->is_string()) return std::vector<std::string>{v->get<std::string>()};
    if (!many || !v->is_array()) {
      return WrongType(field, *v,
                       !many ? "a string"
                       : one ? "a string or an array of strings"
                             : "an array of strings");
    }
    if (v->empty()) return Error(field, absl::StrCat(field, " is an empty array"));
    if (v->size() > static_cast<size_t>(kMaxEmbeddingInputs)) {
      return Error(field, absl::StrCat(field, " has ", v->size(), " texts; the limit is ",
                                       kMaxEmbeddingInputs));
    }
    std::vector<std::string> t;
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) {
        return WrongType(absl::StrCat(field, "[", i, "]"), (*v)[i], "a string");
      }
      t.push_back((*v)[i].get<std::string>());
    }
    return t;
  };
  std::vector<std::string> left, right;
  if (rerank) {
    ASSIGN_OR_RETURN(left, texts("query", true, false));
    ASSIGN_OR_RETURN(right, texts("documents", false, true));
    ASSIGN_OR_RETURN(auto top_n, GetInt32(j, "top_n"));
    if (top_n && *top_n < 0) {
      return Error("top_n", absl::StrCat("top_n must be >= 0, got ", *top_n));
    }
    out.top_n = top_n.value_or(0);
    out.documents = right;
  } else {
    ASSIGN_OR_RETURN(left, texts("text_1", true, true));
    ASSIGN_OR_RETURN(right, texts("text_2", true, true));
    if (left.size() > 1 && left.size() != right.size()) {
      return Error("text_2", absl::StrCat("text_1 has ", left.size(), " texts and text_2 ",
                                          right.size(), ": give one text_1, or as many as text_2"));
    }
  }
  if (left.size() + right.size() > static_cast<size_t>(kMaxEmbeddingInputs)) {
    return Error("", absl::StrCat("the request has ", left.size() + right.size(),
                                  " texts; the limit is ", kMaxEmbeddingInputs));
  }
  for (const auto* side : {&left, &right}) {
    for (const std::string& t : *side) {
      e.prompts.push_back(base);
      e.prompts.back().set_text(t);
    }
  }
  const int n_left = static_cast<int>(left.size());
  for (int k = 0; k < static_cast<int>(right.size()); ++k) {
    out.pairs.emplace_back(n_left == 1 ? 0 : k, n_left + k);
  }
  return out;
}

absl::StatusOr<OpenAiRequest> ParseChatRequest(std::string_view body_view) {
  const absl::string_view body(body_view.data(), body_view.size());
  absl::StatusOr<Json> parsed = ParseBody(body);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  static const FieldSet* const kKnown = new FieldSet(
      kSamplingFields,
      "messages max_tokens max_completion_tokens logprobs top_logprobs add_generation_prompt "
      "chat_template_kwargs tools tool_choice functions function_call parallel_tool_calls");
  RETURN_IF_ERROR(CheckKnownFields(j, *kKnown, ""));

  OpenAiRequest out;
  out.kind = OpenAiRequest::Kind::kChat;
  v1::GenerateRequest request;
  v1::SamplingParams* s = request.mutable_sampling();
  RETURN_IF_ERROR(ParseCommonSampling(j, &out, s));
  ASSIGN_OR_RETURN(out.tool_choice, ParseTools(j, request.mutable_chat(), s));
  ASSIGN_OR_RETURN(auto max_tokens, GetInt32(j, "max_tokens"));
  ASSIGN_OR_RETURN(auto max_completion_tokens, GetInt32(j, "max_completion_tokens"));
  if (max_completion_tokens) {
    s->set_max_tokens(*max_completion_tokens);
  } else if (max_tokens) {
    s->set_max_tokens(*max_tokens);
  }
  ASSIGN_OR_RETURN(auto logprobs, GetBool(j, "logprobs"));
  ASSIGN_OR_RETURN(auto top_logprobs, GetInt32(j, "top_logprobs"));
  if (top_logprobs) {
    if (!logprobs.value_or(false)) {
      return Error("top_logprobs", "top_logprobs needs logprobs set to true");
    }
    if (*top_logprobs < 0) {
      return Error("top_logprobs", absl::StrCat("top_logprobs must be >= 0, got ", *top_logprobs));
    }
  }
  if (logprobs.value_or(false)) {
    out.logprobs = top_logprobs.value_or(0);
    s->set_logprobs(*out.logprobs);
  }
  RETURN_IF_ERROR(ParseChatPrompt(j, request.mutable_chat()));
  RETURN_IF_ERROR(ParseTruncation(j, &request));
  request.set_return_prompt_token_ids(out.return_token_ids);
  out.prompts.push_back(std::move(request));
  return out;
}

absl::StatusOr<LoraChangeRequest> ParseLoraChangeRequest(std::string_view body_view, bool load) {
  const absl::string_view body(body_view.data(), body_view.size());
  absl::StatusOr<Json> parsed = ParseBody(body);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  static const FieldSet* const kLoad = new FieldSet({"lora_name lora_path load_inplace"});
  static const FieldSet* const kUnload = new FieldSet({"lora_name lora_int_id"});
  RETURN_IF_ERROR(CheckKnownFields(j, load ? *kLoad : *kUnload, ""));
  LoraChangeRequest out;
  out.load = load;
  ASSIGN_OR_RETURN(auto name, GetString(j, "lora_name", kMaxLoraAdapterNameBytes + 1));
  if (!name) return Error("lora_name", "lora_name is required");
  if (absl::Status st = CheckLoraAdapterName(*name, "lora_name"); !st.ok()) {
    return Error("lora_name", st.message());
  }
  out.lora_name = *std::move(name);
  if (!load) return out;
  ASSIGN_OR_RETURN(auto path, GetString(j, "lora_path", 4096));
  if (!path || path->empty()) return Error("lora_path", "lora_path is required");
  out.lora_path = *std::move(path);
  ASSIGN_OR_RETURN(auto inplace, GetBool(j, "load_inplace"));
  if (inplace.value_or(false)) {
    return Error("load_inplace",
                 "load_inplace is not supported: unload the adapter, then load the new one (its "
                 "running requests finish with the old weights)");
  }
  return out;
}

absl::StatusOr<TokenizeHttpRequest> ParseTokenizeRequest(std::string_view body_view) {
  const absl::string_view body(body_view.data(), body_view.size());
  absl::StatusOr<Json> parsed = ParseBody(body);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  static const FieldSet* const kKnown =
      new FieldSet({"model prompt add_special_tokens messages add_generation_prompt "
                    "chat_template_kwargs tools return_token_strs"});
  RETURN_IF_ERROR(CheckKnownFields(j, *kKnown, ""));
  TokenizeHttpRequest out;
  ASSIGN_OR_RETURN(auto model, GetString(j, "model", kMaxIdentifierBytes));
  out.model = model.value_or("");
  ASSIGN_OR_RETURN(auto strs, GetBool(j, "return_token_strs"));
  out.return_token_strs = strs.value_or(false);
  ASSIGN_OR_RETURN(auto add_special, GetBool(j, "add_special_tokens"));
  const bool has_prompt = Field(j, "prompt") != nullptr;
  if (has_prompt == (Field(j, "messages") != nullptr)) {
    return Error(has_prompt ? "messages" : "prompt", "give either prompt or messages");
  }
  if (has_prompt) {
    for (const char* chat_only : {"add_generation_prompt", "chat_template_kwargs", "tools"}) {
      if (Field(j, chat_only) != nullptr) {
        return Error(chat_only, absl::StrCat(chat_only, " goes with messages, not prompt"));
      }
    }
    ASSIGN_OR_RETURN(auto prompt, GetString(j, "prompt", std::numeric_limits<size_t>::max()));
    out.request.set_text(*std::move(prompt));
    if (add_special) out.request.set_add_special_tokens(*add_special);
    return out;
  }
  // A chat is tokenized as the template renders it (its own BOS); vLLM's default is false.
  if (add_special.value_or(false)) {
    return Error("add_special_tokens", "add_special_tokens must be false with messages");
  }
  RETURN_IF_ERROR(ParseChatPrompt(j, out.request.mutable_chat()));
  v1::SamplingParams unused;  // no tool_choice here: the tools are only rendered
  RETURN_IF_ERROR(ParseTools(j, out.request.mutable_chat(), &unused).status());
  return out;
}

absl::StatusOr<DetokenizeHttpRequest> ParseDetokenizeRequest(std::string_view body_view) {
  const absl::string_view body(body_view.data(), body_view.size());
  absl::StatusOr<Json> parsed = ParseBody(body);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  static const FieldSet* const kKnown = new FieldSet({"model tokens skip_special_tokens"});
  RETURN_IF_ERROR(CheckKnownFields(j, *kKnown, ""));
  DetokenizeHttpRequest out;
  ASSIGN_OR_RETURN(auto model, GetString(j, "model", kMaxIdentifierBytes));
  out.model = model.value_or("");
  const Json* tokens = Field(j, "tokens");
  if (tokens == nullptr) return Error("tokens", "tokens is required");
  if (!tokens->is_array()) return WrongType("tokens", *tokens, "an array of token ids");
  for (size_t i = 0; i < tokens->size(); ++i) {
    const Json& t = (*tokens)[i];
    if (!t.is_number_integer() || t.get<int64_t>() < INT32_MIN || t.get<int64_t>() > INT32_MAX) {
      return Error("tokens", absl::StrCat("tokens[", i, "] must be a token id (an integer)"));
    }
    out.request.add_token_ids(static_cast<int32_t>(t.get<int64_t>()));
  }
  ASSIGN_OR_RETURN(auto skip, GetBool(j, "skip_special_tokens"));
  if (skip) out.request.set_skip_special_tokens(*skip);
  return out;
}

std::string OpenAiParam(const absl::Status& status) {
  auto p = status.GetPayload(kOpenAiParamPayload);
  return p.has_value() ? std::string(*p) : std::string();
}

}  // namespace pagellm
