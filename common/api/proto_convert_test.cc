#include "common/api/proto_convert.h"

#include "gtest/gtest.h"

namespace pagellm {
namespace {

TEST(ProtoConvertTest, UnsetSamplingFieldsKeepTheDefaults) {
  const SamplingParams d;
  const SamplingParams s = SamplingParamsFromProto(v1::SamplingParams());
  EXPECT_EQ(s.temperature, d.temperature);
  EXPECT_EQ(s.top_p, d.top_p);
  EXPECT_EQ(s.max_tokens, d.max_tokens);
  EXPECT_EQ(s.n, 1);
  EXPECT_TRUE(s.skip_special_tokens);
  EXPECT_FALSE(s.seed.has_value());
  EXPECT_FALSE(s.logprobs.has_value());
  EXPECT_FALSE(s.prompt_logprobs.has_value());
}

TEST(ProtoConvertTest, SetSamplingFieldsComeThroughIncludingZeros) {
  v1::SamplingParams p;
  p.set_temperature(0.0f);
  p.set_max_tokens(7);
  p.set_seed(0);
  p.set_logprobs(0);
  p.set_prompt_logprobs(0);
  p.set_n(3);
  p.add_stop("END");
  p.add_stop_token_ids(5);
  p.set_skip_special_tokens(false);
  const SamplingParams s = SamplingParamsFromProto(p);
  EXPECT_EQ(s.temperature, 0.0f);
  EXPECT_EQ(s.max_tokens, 7);
  EXPECT_EQ(s.seed, 0u);
  EXPECT_EQ(s.logprobs, 0);
  EXPECT_EQ(s.prompt_logprobs, 0);
  EXPECT_EQ(s.n, 3);
  EXPECT_EQ(s.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(s.stop_token_ids, std::vector<int32_t>{5});
  EXPECT_FALSE(s.skip_special_tokens);
}

TEST(ProtoConvertTest, SamplingParamsRoundTrip) {
  SamplingParams s;
  s.temperature = 0.5f;
  s.seed = 9;
  s.logprobs = 3;
  s.prompt_logprobs = 5;
  s.n = 2;
  s.stop = {"a", "b"};
  s.skip_special_tokens = false;
  s.lora_adapter = "sql-lora";
  s.cache_salt = "tenant-salt";
  s.priority = -3;
  s.embed = true;
  v1::SamplingParams p;
  SamplingParamsToProto(s, &p);
  const SamplingParams back = SamplingParamsFromProto(p);
  EXPECT_EQ(back.temperature, 0.5f);
  EXPECT_EQ(back.seed, 9u);
  EXPECT_EQ(back.logprobs, 3);
  EXPECT_EQ(back.prompt_logprobs, 5);
  EXPECT_EQ(back.n, 2);
  EXPECT_EQ(back.stop, s.stop);
  EXPECT_FALSE(back.skip_special_tokens);
  EXPECT_EQ(back.lora_adapter, "sql-lora");
  EXPECT_EQ(back.cache_salt, "tenant-salt");
  EXPECT_EQ(back.priority, -3);
  EXPECT_TRUE(back.embed);
  for (FinishReason r :
       {FinishReason::kNone, FinishReason::kStop, FinishReason::kLength, FinishReason::kAbort}) {
    EXPECT_EQ(FinishReasonFromProto(FinishReasonToProto(r)), r);
  }
}

TEST(ProtoConvertTest, StructuredOutputRoundTripsInEachKind) {
  for (const StructuredOutput& so :
       {StructuredOutput{.kind = StructuredOutput::Kind::kJsonSchema,
       .json_schema = R"({"type":"object"})"},
        StructuredOutput{.kind = StructuredOutput::Kind::kJsonObject},
        StructuredOutput{.kind = StructuredOutput::Kind::kChoice, .choices = {"a", "", "b c"}},
        StructuredOutput{.kind = StructuredOutput::Kind::kRegex, .regex = "(a|b)\\d{2}"},
        StructuredOutput{.kind = StructuredOutput::Kind::kRegex, .regex = ""},
        StructuredOutput{.kind = StructuredOutput::Kind::kGrammar, .grammar = "root ::= \"a\""},
        StructuredOutput{}}) {
    SamplingParams s;
    s.structured_output = so;
    v1::SamplingParams p;
    SamplingParamsToProto(s, &p);
    EXPECT_EQ(p.has_structured_output(), so.enabled());
    const SamplingParams back = SamplingParamsFromProto(p);
    EXPECT_EQ(back.structured_output.kind, so.kind);
    EXPECT_EQ(back.structured_output.json_schema, so.json_schema);
    EXPECT_EQ(back.structured_output.choices, so.choices);
    EXPECT_EQ(back.structured_output.regex, so.regex);
    EXPECT_EQ(back.structured_output.grammar, so.grammar);
    EXPECT_EQ(back.structured_output.CacheKey(), so.CacheKey());
  }
  // json_object: false is no constraint.
  v1::SamplingParams p;
  p.mutable_structured_output()->set_json_object(false);
  EXPECT_FALSE(SamplingParamsFromProto(p).structured_output.enabled());
}

TEST(ProtoConvertTest, VocabSpecRoundTrips) {
  VocabSpec spec;
  spec.model = VocabModel::kSentencePieceBpe;
  spec.pre = "llama3";
  spec.pre_patterns = {"\\s+"};
  spec.tokens = {"a", "b", std::string("\xff\x00", 2)};
  spec.scores = {0.5f, -1.0f, 0.0f};
  spec.token_types = {TokenType::kNormal, TokenType::kControl, TokenType::kUnused};
  spec.merges = {{"a", "b"}};
  spec.bos_id = 1;
  spec.eog_ids = {2};
  spec.add_bos = true;
  spec.space_prefix_first_only = true;
  spec.lstrip_ids = {1};
  v1::TokenizerSpec p;
  VocabSpecToProto(spec, &p);
  absl::StatusOr<VocabSpec> back = VocabSpecFromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model, spec.model);
  EXPECT_EQ(back->pre, spec.pre);
  EXPECT_EQ(back->pre_patterns, spec.pre_patterns);
  EXPECT_EQ(back->tokens, spec.tokens);
  EXPECT_EQ(back->scores, spec.scores);
  EXPECT_EQ(back->token_types, spec.token_types);
  EXPECT_EQ(back->merges, spec.merges);
  EXPECT_EQ(back->bos_id, 1);
  EXPECT_EQ(back->eos_id, -1);
  EXPECT_EQ(back->eog_ids, spec.eog_ids);
  EXPECT_TRUE(back->add_bos);
  EXPECT_TRUE(back->space_prefix_first_only);
  EXPECT_EQ(back->lstrip_ids, spec.lstrip_ids);
}

TEST(ProtoConvertTest, RejectsUnknownEnums) {
  v1::TokenizerSpec p;
  p.add_tokens("a");
  p.add_token_types(9);
  EXPECT_EQ(VocabSpecFromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  p.clear_token_types();
  p.add_merge_left("a");
  EXPECT_EQ(VocabSpecFromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProtoConvertTest, StatusCodesMapOneToOne) {
  const absl::Status s = absl::ResourceExhaustedError("queue full");
  const grpc::Status g = ToGrpcStatus(s);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(g.error_message(), "queue full");
  EXPECT_EQ(FromGrpcStatus(g), s);
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace pagellm
