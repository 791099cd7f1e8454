#include "common/api/proto_convert.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/api/request_limits.h"

namespace pagellm {

SamplingParams SamplingParamsFromProto(const v1::SamplingParams& p) {
  SamplingParams s;
  if (p.has_temperature()) s.temperature = p.temperature();
  if (p.has_top_p()) s.top_p = p.top_p();
  if (p.has_top_k()) s.top_k = p.top_k();
  if (p.has_min_p()) s.min_p = p.min_p();
  if (p.has_repetition_penalty()) s.repetition_penalty = p.repetition_penalty();
  if (p.has_presence_penalty()) s.presence_penalty = p.presence_penalty();
  if (p.has_frequency_penalty()) s.frequency_penalty = p.frequency_penalty();
  if (p.has_seed()) s.seed = p.seed();
  if (p.has_max_tokens()) s.max_tokens = p.max_tokens();
  if (p.has_min_tokens()) s.min_tokens = p.min_tokens();
  if (p.has_ignore_eos()) s.ignore_eos = p.ignore_eos();
  s.stop.assign(p.stop().begin(), p.stop().end());
  s.stop_token_ids.assign(p.stop_token_ids().begin(), p.stop_token_ids().end());
  if (p.has_include_stop_str_in_output()) {
    s.include_stop_str_in_output = p.include_stop_str_in_output();
  }
  if (p.has_logprobs()) s.logprobs = p.logprobs();
  if (p.has_prompt_logprobs()) s.prompt_logprobs = p.prompt_logprobs();
  if (p.has_skip_special_tokens()) s.skip_special_tokens = p.skip_special_tokens();
  if (p.has_n()) s.n = p.n();
  if (p.has_beam_width()) s.beam_width = p.beam_width();
  if (p.has_length_penalty()) s.length_penalty = p.length_penalty();
  if (p.has_early_stopping()) s.early_stopping = p.early_stopping();
  s.lora_adapter = p.lora_adapter();
  s.cache_salt = p.cache_salt();
  s.priority = p.priority();
  s.embed = p.embed();
  s.logit_bias.assign(p.logit_bias().begin(), p.logit_bias().end());
  std::sort(s.logit_bias.begin(), s.logit_bias.end());
  s.allowed_token_ids.assign(p.allowed_token_ids().begin(), p.allowed_token_ids().end());
  if (p.has_structured_output()) {
    const v1::StructuredOutput& so = p.structured_output();
    switch (so.kind_case()) {
      case v1::StructuredOutput::kJsonSchema:
        s.structured_output.kind = StructuredOutput::Kind::kJsonSchema;
        s.structured_output.json_schema = so.json_schema();
        break;
      case v1::StructuredOutput::kJsonObject:
        if (so.json_object()) s.structured_output.kind = StructuredOutput::Kind::kJsonObject;
        break;
      case v1::StructuredOutput::kRegex:
        s.structured_output.kind = StructuredOutput::Kind::kRegex;
        s.structured_output.regex = so.regex();
        break;
      case v1::StructuredOutput::kGrammar:
        s.structured_output.kind = StructuredOutput::Kind::kGrammar;
        s.structured_output.grammar = so.grammar();
        break;
      case v1::StructuredOutput::kChoice:
        s.structured_output.kind = StructuredOutput::Kind::kChoice;
        s.structured_output.choices.assign(so.choice().values().begin(),
                                           so.choice().values().end());
        break;
      case v1::StructuredOutput::KIND_NOT_SET:
        break;
    }
  }
  return s;
}

void SamplingParamsToProto(const SamplingParams& s, v1::SamplingParams* out) {
  out->set_temperature(s.temperature);
  out->set_top_p(s.top_p);
  out->set_top_k(s.top_k);
  out->set_min_p(s.min_p);
  out->set_repetition_penalty(s.repetition_penalty);
  out->set_presence_penalty(s.presence_penalty);
  out->set_frequency_penalty(s.frequency_penalty);
  if (s.seed.has_value()) out->set_seed(*s.seed);
  out->set_max_tokens(s.max_tokens);
  out->set_min_tokens(s.min_tokens);
  out->set_ignore_eos(s.ignore_eos);
  for (const std::string& stop : s.stop) out->add_stop(stop);
  for (int32_t id : s.stop_token_ids) out->add_stop_token_ids(id);
  out->set_include_stop_str_in_output(s.include_stop_str_in_output);
  if (s.logprobs.has_value()) out->set_logprobs(*s.logprobs);
  if (s.prompt_logprobs.has_value()) out->set_prompt_logprobs(*s.prompt_logprobs);
  out->set_skip_special_tokens(s.skip_special_tokens);
  out->set_n(s.n);
  out->set_beam_width(s.beam_width);
  out->set_length_penalty(s.length_penalty);
  out->set_early_stopping(s.early_stopping);
  out->set_lora_adapter(s.lora_adapter);
  out->set_cache_salt(s.cache_salt);
  out->set_priority(s.priority);
  out->set_embed(s.embed);
  for (const auto& [id, bias] : s.logit_bias) (*out->mutable_logit_bias())[id] = bias;
  for (int32_t id : s.allowed_token_ids) out->add_allowed_token_ids(id);
  switch (s.structured_output.kind) {
    case StructuredOutput::Kind::kNone:
      break;
    case StructuredOutput::Kind::kJsonSchema:
      out->mutable_structured_output()->set_json_schema(s.structured_output.json_schema);
      break;
    case StructuredOutput::Kind::kJsonObject:
      out->mutable_structured_output()->set_json_object(true);
      break;
    case StructuredOutput::Kind::kRegex:
      out->mutable_structured_output()->set_regex(s.structured_output.regex);
      break;
    case StructuredOutput::Kind::kGrammar:
      out->mutable_structured_output()->set_grammar(s.structured_output.grammar);
      break;
    case StructuredOutput::Kind::kChoice:
      for (const std::string& c : s.structured_output.choices) {
        out->mutable_structured_output()->mutable_choice()->add_values(c);
      }
      break;
  }
}

FinishReason FinishReasonFromProto(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_STOP:
      return FinishReason::kStop;
    case v1::FINISH_REASON_LENGTH:
      return FinishReason::kLength;
    case v1::FINISH_REASON_ABORT:
      return FinishReason::kAbort;
    default:
      return FinishReason::kNone;
  }
}

v1::FinishReason FinishReasonToProto(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return v1::FINISH_REASON_UNSPECIFIED;
    case FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case FinishReason::kAbort:
      return v1::FINISH_REASON_ABORT;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

void VocabSpecToProto(const VocabSpec& spec, v1::TokenizerSpec* out) {
  out->set_model(spec.model == VocabModel::kSentencePieceBpe ? v1::TokenizerSpec::SENTENCE_PIECE_BPE
                                                             : v1::TokenizerSpec::BYTE_LEVEL_BPE);
  out->set_pre(spec.pre);
  for (const std::string& p : spec.pre_patterns) out->add_pre_patterns(p);
  for (const std::string& t : spec.tokens) out->add_tokens(t);
  for (float s : spec.scores) out->add_scores(s);
  for (TokenType t : spec.token_types) out->add_token_types(static_cast<int32_t>(t));
  for (const auto& [l, r] : spec.merges) {
    out->add_merge_left(l);
    out->add_merge_right(r);
  }
  out->set_bos_id(spec.bos_id);
  out->set_eos_id(spec.eos_id);
  out->set_unk_id(spec.unk_id);
  out->set_pad_id(spec.pad_id);
  out->set_eot_id(spec.eot_id);
  out->set_eom_id(spec.eom_id);
  for (int32_t id : spec.eog_ids) out->add_eog_ids(id);
  out->set_add_bos(spec.add_bos);
  out->set_add_eos(spec.add_eos);
  out->set_add_space_prefix(spec.add_space_prefix);
  out->set_space_prefix_first_only(spec.space_prefix_first_only);
  out->set_ignore_merges(spec.ignore_merges);
  for (int32_t id : spec.lstrip_ids) out->add_lstrip_ids(id);
  for (int32_t id : spec.rstrip_ids) out->add_rstrip_ids(id);
}

absl::StatusOr<VocabSpec> VocabSpecFromProto(const v1::TokenizerSpec& p) {
  VocabSpec spec;
  switch (p.model()) {
    case v1::TokenizerSpec::BYTE_LEVEL_BPE:
      spec.model = VocabModel::kByteLevelBpe;
      break;
    case v1::TokenizerSpec::SENTENCE_PIECE_BPE:
      spec.model = VocabModel::kSentencePieceBpe;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown tokenizer model ", p.model()));
  }
  if (p.merge_left_size() != p.merge_right_size()) {
    return absl::InvalidArgumentError("tokenizer merges have unequal sides");
  }
  spec.pre = p.pre();
  spec.pre_patterns.assign(p.pre_patterns().begin(), p.pre_patterns().end());
  spec.tokens.assign(p.tokens().begin(), p.tokens().end());
  spec.scores.assign(p.scores().begin(), p.scores().end());
  for (int32_t t : p.token_types()) {
    if (t < static_cast<int32_t>(TokenType::kNormal) ||
        t > static_cast<int32_t>(TokenType::kUnused)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown token type ", t));
    }
    spec.token_types.push_back(static_cast<TokenType>(t));
  }
  for (int i = 0; i < p.merge_left_size(); ++i) {
    spec.merges.emplace_back(p.merge_left(i), p.merge_right(i));
  }
  spec.bos_id = p.bos_id();
  spec.eos_id = p.eos_id();
  spec.unk_id = p.unk_id();
  spec.pad_id = p.pad_id();
  spec.eot_id = p.eot_id();
  spec.eom_id = p.eom_id();
  spec.eog_ids.assign(p.eog_ids().begin(), p.eog_ids().end());
  spec.add_bos = p.add_bos();
  spec.add_eos = p.add_eos();
  spec.add_space_prefix = p.add_space_prefix();
  spec.space_prefix_first_only = p.space_prefix_first_only();
  spec.ignore_merges = p.ignore_merges();
  spec.lstrip_ids.assign(p.lstrip_ids().begin(), p.lstrip_ids().end());
  spec.rstrip_ids.assign(p.rstrip_ids().begin(), p.rstrip_ids().end());
  return spec;
}

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // Messages may quote what a client sent; keep them well inside gRPC's metadata limit.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), BoundedErrorMessage(s.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace pagellm
