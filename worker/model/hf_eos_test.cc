// End-of-generation ids against vLLM's reading of generation_config.json and config.json:
// tests/data/generation_config/vllm_defaults.json, made by
// tools/fixtures/make_generation_config_fixture.py with transformers as vLLM 0.32 uses it.
#include "worker/model/hf_eos.h"

#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

using ::testing::HasSubstr;

constexpr char kFixture[] = "tests/data/generation_config/vllm_defaults.json";

nlohmann::json Fixture() {
  std::ifstream in(kFixture);
  EXPECT_TRUE(in.good()) << kFixture;
  return nlohmann::json::parse(in, nullptr, false);
}

TEST(HfEosTest, GenerationConfigIdsAreVllms) {
  const nlohmann::json fixture = Fixture();
  ASSERT_TRUE(fixture.is_object() && fixture["cases"].is_array());
  int with_ids = 0;
  for (const nlohmann::json& c : fixture["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    absl::StatusOr<std::vector<int32_t>> got =
        EosIdsFromGenerationConfig(c["generation_config"].dump(), "generation_config.json");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, c["eos_token_ids"].get<std::vector<int32_t>>());
    with_ids += !got->empty();
  }
  EXPECT_GE(with_ids, 6);  // lists, single ids, repeats
}

TEST(HfEosTest, WithoutAGenerationConfigTheIdsComeFromConfigJson) {
  const nlohmann::json fixture = Fixture();
  ASSERT_TRUE(fixture["config_json_cases"].is_array());
  ASSERT_GE(fixture["config_json_cases"].size(), 6u);
  for (const nlohmann::json& c : fixture["config_json_cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    absl::StatusOr<std::vector<int32_t>> got =
        EosIdsFromConfigJson(c["config_json"].dump(), "config.json");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, c["eos_token_ids"].get<std::vector<int32_t>>());
  }
}

TEST(HfEosTest, WhatIsNotAnIdIsRefusedNamingTheFile) {
  std::string many = "[";
  for (size_t i = 0; i <= kMaxEosTokenIds; ++i) many += (i > 0 ? "," : "") + std::to_string(i);
  many += "]";
  for (const std::string& value :
       {std::string("-1"), std::string("[1, -2]"), std::string("\"2\""), std::string("1.5"),
        std::string("[[1]]"), std::string("true"), std::string("{}"), std::string("2147483648"),
        std::string("18446744073709551615"), many}) {
    SCOPED_TRACE(value);
    const std::string json = "{\"eos_token_id\": " + value + "}";
    for (const absl::StatusOr<std::vector<int32_t>>& got :
         {EosIdsFromGenerationConfig(json, "generation_config.json"),
          EosIdsFromConfigJson(json, "generation_config.json")}) {
      ASSERT_FALSE(got.ok());
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(got.status().message()), HasSubstr("generation_config.json"));
    }
  }
  for (const char* text : {"", "[2]", "{\"eos_token_id\": 2", "{\"a\": 1, \"a\": 2}"}) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(EosIdsFromGenerationConfig(text, "g").ok());
    EXPECT_FALSE(EosIdsFromConfigJson(text, "c").ok());
  }
  EXPECT_EQ(*EosIdsFromGenerationConfig("{\"eos_token_id\": 2147483647}", "g"),
            std::vector<int32_t>{2147483647});
}

}  // namespace
}  // namespace pagellm
