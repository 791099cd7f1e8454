#include "common/sampling/sampling_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pagellm {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view rule, double value) {
  return absl::InvalidArgumentError(
      absl::StrCat("sampling_params.", field, " ", rule, ", got ", value));
}

}  // namespace

std::string StructuredOutput::CacheKey() const {
  switch (kind) {
    case Kind::kNone:
      return "";
    case Kind::kJsonObject:
      return "object";
    case Kind::kJsonSchema:
      return absl::StrCat("schema:", json_schema);
    case Kind::kRegex:
      return absl::StrCat("regex:", regex);
    case Kind::kGrammar:
      return absl::StrCat("grammar:", grammar);
    case Kind::kChoice: {
      std::string key = "choice";
      for (const std::string& c : choices) absl::StrAppend(&key, ":", c.size(), ":", c);
      return key;
    }
  }
  return "";
}

absl::Status StructuredOutput::Validate() const {
  if (!enabled()) return absl::OkStatus();
  const StructuredOutput& so = *this;
  if (so.json_schema.size() > static_cast<size_t>(kMaxStructuredBytes)) {
    return Bad("structured_output.json_schema",
               absl::StrCat("may hold at most ", kMaxStructuredBytes, " bytes"),
               static_cast<double>(so.json_schema.size()));
  }
  for (const auto& [field, text] :
       {std::pair<const char*, const std::string&>{"structured_output.regex", so.regex},
        {"structured_output.grammar", so.grammar}}) {
    if (text.size() > static_cast<size_t>(kMaxStructuredBytes)) {
      return Bad(field, absl::StrCat("may hold at most ", kMaxStructuredBytes, " bytes"),
                 static_cast<double>(text.size()));
    }
  }
  if (so.kind == StructuredOutput::Kind::kJsonSchema && so.json_schema.empty()) {
    return absl::InvalidArgumentError("sampling_params.structured_output.json_schema is empty");
  }
  if (so.kind == StructuredOutput::Kind::kChoice) {
    if (so.choices.empty() || so.choices.size() > static_cast<size_t>(kMaxChoices)) {
      return Bad("structured_output.choice",
                 absl::StrCat("must hold 1 to ", kMaxChoices, " strings"),
                 static_cast<double>(so.choices.size()));
    }
    size_t bytes = 0;
    for (const std::string& c : so.choices) {
      bytes += c.size();
      if (!IsValidUtf8(std::string_view(c))) {
        return absl::InvalidArgumentError(
            "sampling_params.structured_output.choice holds a string that is not UTF-8");
      }
    }
    if (bytes > static_cast<size_t>(kMaxStructuredBytes)) {
      return Bad("structured_output.choice",
                 absl::StrCat("may hold at most ", kMaxStructuredBytes, " bytes in total"),
                 static_cast<double>(bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status SamplingParams::Validate(int64_t vocab_size) const {
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size must be > 0, got ", vocab_size));
  }
  // Comparisons are written so that NaN fails them.
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    return Bad("temperature", "must be finite and >= 0", temperature);
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) return Bad("top_p", "must be in (0, 1]", top_p);
  if (lora_adapter.size() > kMaxLoraAdapterNameBytes) {
    return Bad("lora_adapter",
               absl::StrCat("may hold at most ", kMaxLoraAdapterNameBytes, " bytes"),
               static_cast<double>(lora_adapter.size()));
  }
  if (cache_salt.size() > kMaxCacheSaltBytes) {
    return Bad("cache_salt", absl::StrCat("may hold at most ", kMaxCacheSaltBytes, " bytes"),
               static_cast<double>(cache_salt.size()));
  }
  if (top_k < -1) return Bad("top_k", "must be -1, 0 (disabled) or positive", top_k);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return Bad("min_p", "must be in [0, 1]", min_p);
  if (!(repetition_penalty >= 1.0f / kMaxRepetitionPenalty &&
        repetition_penalty <= kMaxRepetitionPenalty)) {
    return Bad("repetition_penalty",
               absl::StrCat("must be in [", 1.0f / kMaxRepetitionPenalty, ", ",
                            kMaxRepetitionPenalty, "]"),
               repetition_penalty);
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return Bad("presence_penalty", "must be in [-2, 2]", presence_penalty);
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return Bad("frequency_penalty", "must be in [-2, 2]", frequency_penalty);
  }
  if (max_tokens < 1) return Bad("max_tokens", "must be >= 1", max_tokens);
  if (min_tokens < 0) return Bad("min_tokens", "must be >= 0", min_tokens);
  if (min_tokens > max_tokens) {
    return Bad("min_tokens", absl::StrCat("must be <= max_tokens (", max_tokens, ")"), min_tokens);
  }
  if (logprobs.has_value() && (*logprobs < 0 || *logprobs > kMaxLogprobs)) {
    return Bad("logprobs", absl::StrCat("must be in [0, ", kMaxLogprobs, "]"), *logprobs);
  }
  if (prompt_logprobs.has_value() && (*prompt_logprobs < 0 || *prompt_logprobs > kMaxLogprobs)) {
    return Bad("prompt_logprobs", absl::StrCat("must be in [0, ", kMaxLogprobs, "]"),
               *prompt_logprobs);
  }
  if (logit_bias.size() > static_cast<size_t>(kMaxLogitBias)) {
    return Bad("logit_bias", absl::StrCat("may have at most ", kMaxLogitBias, " entries"),
               static_cast<double>(logit_bias.size()));
  }
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto& [id, bias] = logit_bias[i];
    if (id < 0 || id >= vocab_size || (i > 0 && id <= logit_bias[i - 1].first)) {
      return Bad("logit_bias",
                 absl::StrCat("keys must be distinct token ids in [0, ", vocab_size, ")"), id);
    }
    if (!(bias >= -kMaxLogitBiasValue && bias <= kMaxLogitBiasValue)) {
      return Bad("logit_bias", "values must be in [-100, 100]", bias);
    }
  }
  if (allowed_token_ids.size() > static_cast<size_t>(kMaxAllowedTokenIds)) {
    return Bad("allowed_token_ids",
               absl::StrCat("may have at most ", kMaxAllowedTokenIds, " entries"),
               static_cast<double>(allowed_token_ids.size()));
  }
  for (int32_t id : allowed_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return Bad("allowed_token_ids", absl::StrCat("entries must be in [0, ", vocab_size, ")"), id);
    }
  }
  if (UseBeamSearch() && (!logit_bias.empty() || !allowed_token_ids.empty())) {
    return absl::InvalidArgumentError(
        "sampling_params.logit_bias and allowed_token_ids are not supported with beam search");
  }
  if (structured_output.enabled()) {
    const StructuredOutput& so = structured_output;
    if (UseBeamSearch()) {
      return absl::InvalidArgumentError(
          "sampling_params.structured_output is not supported with beam search");
    }
    RETURN_IF_ERROR(so.Validate());
  }
  if (stop_token_ids.size() > static_cast<size_t>(kMaxStopTokenIds)) {
    return Bad("stop_token_ids", absl::StrCat("may have at most ", kMaxStopTokenIds, " entries"),
               static_cast<double>(stop_token_ids.size()));
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return Bad("stop_token_ids", absl::StrCat("entries must be in [0, ", vocab_size, ")"), id);
    }
  }
  if (stop.size() > static_cast<size_t>(kMaxStopStrings)) {
    return Bad("stop", absl::StrCat("may have at most ", kMaxStopStrings, " strings"),
               static_cast<double>(stop.size()));
  }
  size_t stop_bytes = 0;
  for (const std::string& s : stop) stop_bytes += s.size();
  if (stop_bytes > static_cast<size_t>(kMaxStopBytes)) {
    return Bad("stop", absl::StrCat("may hold at most ", kMaxStopBytes, " bytes in total"),
               static_cast<double>(stop_bytes));
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sampling_params.stop[", i, "] is empty"));
    }
    if (!IsValidUtf8(std::string_view(stop[i]))) {
      return absl::InvalidArgumentError(
          absl::StrCat("sampling_params.stop[", i, "] is not valid UTF-8"));
    }
  }
  if (n < 1 || n > kMaxParallelSamples) {
    return Bad("n", absl::StrCat("must be in [1, ", kMaxParallelSamples, "]"), n);
  }
  if (beam_width < 0 || beam_width > kMaxParallelSamples) {
    return Bad("beam_width", absl::StrCat("must be in [0, ", kMaxParallelSamples, "]"), beam_width);
  }
  if (!std::isfinite(length_penalty))
    return Bad("length_penalty", "must be finite", length_penalty);
  if (UseBeamSearch()) {
    if (n != 1) return Bad("n", "must be 1 with beam search (beam_width completions return)", n);
    if (!IsGreedy()) return Bad("temperature", "must be 0 with beam search", temperature);
    if (!stop.empty()) {
      return absl::InvalidArgumentError("stop strings are not supported with beam search");
    }
    if (logprobs.has_value()) {
      return absl::InvalidArgumentError("logprobs are not supported with beam search");
    }
    if (2 * static_cast<int64_t>(beam_width) > vocab_size) {
      return Bad("beam_width", "must be at most half the vocabulary", beam_width);
    }
  }
  if (embed) {
    const char* generation_only = n != 1                        ? "n > 1"
                                  : UseBeamSearch()             ? "beam search"
                                  : logprobs.has_value()        ? "logprobs"
                                  : prompt_logprobs.has_value() ? "prompt_logprobs"
                                  : structured_output.enabled() ? "structured output"
                                                                : nullptr;
    if (generation_only != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("an embedding request generates nothing: ",
                                                     generation_only, " is not supported with it"));
    }
  }
  return absl::OkStatus();
}

absl::Status SamplingParams::CheckContext(int64_t prompt_len, int64_t max_model_len) const {
  const int64_t total = MaxContext(prompt_len);
  if (total <= max_model_len) return absl::OkStatus();
  if (embed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the input (", total, " tokens) exceeds the maximum model length of ", max_model_len));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("prompt (", prompt_len, " tokens) + max_tokens (", max_tokens, ") = ", total,
                   " exceeds the maximum model length of ", max_model_len));
}

}  // namespace pagellm
