#include "worker/model/hf_config.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;

// Trimmed from meta-llama/Meta-Llama-3-8B's config.json (rope_scaling from Llama 3.1).
constexpr char kLlama3[] = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0", "use_cache": true, "vocab_size": 128256})";

// Trimmed from Qwen/Qwen2-0.5B-Instruct.
constexpr char kQwen2[] = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// HuggingFaceTB/SmolLM2-135M-Instruct.
constexpr char kSmolLm2[] = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": true,
  "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9,
  "num_hidden_layers": 30, "num_key_value_heads": 3, "pad_token_id": 2, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05, "rope_interleaved": false, "rope_scaling": null, "rope_theta": 100000,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.42.3",
  "use_cache": true, "vocab_size": 49152})";

// Smallest accepted config; tests append or override one field at a time.
std::string Minimal(absl::string_view extra = "") {
  return absl::StrCat(R"({"architectures":["LlamaForCausalLM"],"vocab_size":100,)",
                      R"("hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,)",
                      R"("num_attention_heads":4)", extra, "}");
}

void ExpectInvalid(std::string_view json, std::string_view fragment) {
  auto c = ParseHfConfig(json);
  ASSERT_FALSE(c.ok()) << json;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(std::string(fragment))) << json;
}

TEST(HfConfigTest, Llama3) {
  auto c = ParseHfConfig(kLlama3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->intermediate_size, 14336);
  EXPECT_EQ(c->num_layers, 32);
  EXPECT_EQ(c->num_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->max_position_embeddings, 8192);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
}

TEST(HfConfigTest, Qwen2HasAttentionBias) {
  auto c = ParseHfConfig(kQwen2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen2");
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->max_position_embeddings, 32768);  // use_sliding_window is false
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kNone);
}

TEST(HfConfigTest, SmolLm2) {
  auto c = ParseHfConfig(kSmolLm2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->hidden_size, 576);
  EXPECT_EQ(c->num_layers, 30);
  EXPECT_EQ(c->num_heads, 9);
  EXPECT_EQ(c->num_kv_heads, 3);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_FLOAT_EQ(c->rope_theta, 100000.0f);  // an integer in the JSON
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kNone);
}

TEST(HfConfigTest, DefaultsFollowTransformers) {
  auto c = ParseHfConfig(Minimal());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->max_position_embeddings, 2048);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
  EXPECT_FALSE(c->tie_word_embeddings);

  auto by_type = ParseHfConfig(
      R"({"model_type":"mistral","vocab_size":100,"hidden_size":64,"intermediate_size":128,)"
      R"("num_hidden_layers":2,"num_attention_heads":16,"head_dim":null,"sliding_window":null})");
  ASSERT_TRUE(by_type.ok()) << by_type.status();
  EXPECT_EQ(by_type->num_kv_heads, 8);  // MistralConfig's default
  EXPECT_EQ(by_type->head_dim, 4);
  EXPECT_EQ(by_type->max_position_embeddings, 131072);
}

TEST(HfConfigTest, ExplicitHeadDimAndLinearScaling) {
  auto c = ParseHfConfig(Minimal(R"(,"head_dim":32,"rope_scaling":{"type":"linear","factor":2})"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 2.0f);
  auto d = ParseHfConfig(Minimal(R"(,"rope_scaling":{"rope_type":"default"})"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->rope_scaling.type, RopeScaling::Type::kNone);
}

TEST(HfConfigTest, SlidingWindowClampsContext) {
  auto mistral = ParseHfConfig(
      R"({"architectures":["MistralForCausalLM"],"vocab_size":32000,"hidden_size":4096,)"
      R"("intermediate_size":14336,"num_hidden_layers":32,"num_attention_heads":32,)"
      R"("num_key_value_heads":8,"max_position_embeddings":32768,"sliding_window":4096})");
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_EQ(mistral->architecture, "llama");
  EXPECT_EQ(mistral->max_position_embeddings, 4096);
  std::string qwen(kQwen2);
  qwen.replace(qwen.find(R"("sliding_window": 32768)"), 23, R"("sliding_window": 4096)");
  qwen.replace(qwen.find(R"("use_sliding_window": false)"), 27, R"("use_sliding_window": true)");
  auto q = ParseHfConfig(qwen);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->max_position_embeddings, 4096);
}

TEST(HfConfigTest, RejectsBadDocuments) {
  ExpectInvalid("", "not valid JSON");
  ExpectInvalid("{", "not valid JSON");
  ExpectInvalid("[]", "not a JSON object");
  ExpectInvalid("{}", "architectures");
}

TEST(HfConfigTest, RejectsUnsupportedArchitectures) {
  ExpectInvalid(R"({"architectures":["GPT2LMHeadModel"]})", "'GPT2LMHeadModel' is not supported");
  ExpectInvalid(R"({"architectures":[]})", "non-empty list");
  ExpectInvalid(R"({"architectures":"LlamaForCausalLM"})", "non-empty list");
  ExpectInvalid(R"({"model_type":"gemma"})", "'gemma' is not supported");
}

TEST(HfConfigTest, RejectsWrongTypes) {
  ExpectInvalid(R"({"architectures":["LlamaForCausalLM"],"vocab_size":"100"})",
                "vocab_size must be an integer");
  ExpectInvalid(R"({"architectures":["LlamaForCausalLM"],"vocab_size":100.5})",
                "vocab_size must be an integer");
  ExpectInvalid(R"({"architectures":["LlamaForCausalLM"],"vocab_size":true})",
                "vocab_size must be an integer");
  ExpectInvalid(R"({"architectures":["LlamaForCausalLM"],"vocab_size":100})",
                "hidden_size is missing");
  ExpectInvalid(Minimal(R"(,"rms_norm_eps":"1e-5")"), "rms_norm_eps must be a number");
  ExpectInvalid(Minimal(R"(,"rope_theta":1e300)"), "rope_theta is out of range");
  ExpectInvalid(Minimal(R"(,"tie_word_embeddings":1)"), "tie_word_embeddings must be true");
  ExpectInvalid(Minimal(R"(,"num_key_value_heads":99999999999999999999)"),
                "num_key_value_heads must be an integer");
  ExpectInvalid(Minimal(R"(,"num_key_value_heads":18446744073709551615)"), "out of range");
  ExpectInvalid(Minimal(R"(,"rope_scaling":[1])"), "rope_scaling must be an object");
}

TEST(HfConfigTest, RejectsBadValues) {
  ExpectInvalid(Minimal(R"(,"num_key_value_heads":3)"), "num_kv_heads");
  ExpectInvalid(Minimal(R"(,"head_dim":15)"), "head_dim");
  ExpectInvalid(Minimal(R"(,"rms_norm_eps":0)"), "rms_norm_eps");
  ExpectInvalid(Minimal(R"(,"max_position_embeddings":-1)"), "max_position_embeddings");
  ExpectInvalid(R"({"architectures":["LlamaForCausalLM"],"vocab_size":100,"hidden_size":65,)"
                R"("intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4})",
                "not a multiple of num_attention_heads");
  ExpectInvalid(R"({"architectures":["LlamaForCausalLM"],"vocab_size":100,"hidden_size":64,)"
                R"("intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":0})",
                "num_attention_heads must be positive");
  ExpectInvalid(R"({"architectures":["LlamaForCausalLM"],"vocab_size":0,"hidden_size":64,)"
                R"("intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4})",
                "vocab_size");
}

// transformers 5 writes rope_theta and the scaling into one rope_parameters object (as
// LlamaConfig(...).to_json_string() of transformers 5.17 does), and no top-level keys.
TEST(HfConfigTest, RopeParametersOfTransformers5) {
  auto llama3 = ParseHfConfig(Minimal(
      R"(,"max_position_embeddings":131072,"rope_parameters":{"factor":8.0,"high_freq_factor":4.0,)"
      R"("low_freq_factor":1.0,"original_max_position_embeddings":8192,"rope_theta":500000.0,)"
      R"("rope_type":"llama3"})"));
  ASSERT_TRUE(llama3.ok()) << llama3.status();
  EXPECT_FLOAT_EQ(llama3->rope_theta, 500000.0f);
  EXPECT_EQ(llama3->rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(llama3->rope_scaling.factor, 8.0f);
  EXPECT_EQ(llama3->rope_scaling.original_max_position_embeddings, 8192);

  auto plain = ParseHfConfig(
      Minimal(R"(,"rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"})"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FLOAT_EQ(plain->rope_theta, 1000000.0f);  // not the 10000 default
  EXPECT_EQ(plain->rope_scaling.type, RopeScaling::Type::kNone);

  auto theta_only = ParseHfConfig(Minimal(R"(,"rope_parameters":{"rope_theta":250000.0})"));
  ASSERT_TRUE(theta_only.ok()) << theta_only.status();
  EXPECT_FLOAT_EQ(theta_only->rope_theta, 250000.0f);

  auto both_agree = ParseHfConfig(
      Minimal(R"(,"rope_theta":1e6,"rope_parameters":{"rope_theta":1e6,"rope_type":"default"})"));
  ASSERT_TRUE(both_agree.ok()) << both_agree.status();
  ExpectInvalid(
      Minimal(R"(,"rope_theta":1e4,"rope_parameters":{"rope_theta":1e6,"rope_type":"default"})"),
      "disagrees");
  // Both spellings, as tools/gpu/hf_reference.py writes them for readers of either: the same
  // scaling is read once; different ones are refused, not picked from.
  auto both_scale = ParseHfConfig(
      Minimal(R"(,"rope_theta":1e6,"rope_scaling":{"rope_type":"linear","factor":2},)"
              R"("rope_parameters":{"rope_theta":1e6,"rope_type":"linear","factor":2})"));
  ASSERT_TRUE(both_scale.ok()) << both_scale.status();
  EXPECT_EQ(both_scale->rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(both_scale->rope_scaling.factor, 2.0f);
  ExpectInvalid(Minimal(R"(,"rope_scaling":{"rope_type":"linear","factor":4},)"
                        R"("rope_parameters":{"rope_theta":1e6,"rope_type":"linear","factor":2})"),
                "rope_scaling disagrees with rope_parameters");
  ExpectInvalid(Minimal(R"(,"rope_scaling":{"rope_type":"linear","factor":2},)"
                        R"("rope_parameters":{"rope_theta":1e6})"),
                "rope_scaling disagrees with rope_parameters");
  ExpectInvalid(Minimal(R"(,"rope_parameters":[1])"), "rope_parameters must be an object");
  ExpectInvalid(Minimal(R"(,"rope_parameters":{"rope_type":"yarn","factor":4})"), "'yarn'");
}

TEST(HfConfigTest, RejectsUnsupportedFeatures) {
  ExpectInvalid(Minimal(R"(,"hidden_act":"gelu")"), "hidden_act");
  ExpectInvalid(Minimal(R"(,"mlp_bias":true)"), "mlp_bias");
  ExpectInvalid(Minimal(R"(,"rope_scaling":{"rope_type":"yarn","factor":4})"), "'yarn'");
  ExpectInvalid(Minimal(R"(,"rope_scaling":{"factor":4})"), "rope_type is missing");
  ExpectInvalid(Minimal(R"(,"rope_scaling":{"rope_type":"linear"})"), "factor is missing");
  ExpectInvalid(Minimal(R"(,"rope_scaling":{"rope_type":"linear","factor":0})"), "factor");
  ExpectInvalid(Minimal(R"(,"rope_scaling":{"rope_type":"llama3","factor":8,)"
                        R"("low_freq_factor":1,"high_freq_factor":4})"),
                "original_max_position_embeddings is missing");
  ExpectInvalid(Minimal(R"(,"rope_scaling":{"rope_type":"llama3","factor":8,)"
                        R"("low_freq_factor":4,"high_freq_factor":1,)"
                        R"("original_max_position_embeddings":8192})"),
                "low_freq_factor < high_freq_factor");
}

}  // namespace
}  // namespace pagellm
