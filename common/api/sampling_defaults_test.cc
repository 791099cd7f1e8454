// Default sampling parameters against vLLM's reading of generation_config.json:
// tests/data/generation_config/vllm_defaults.json, made by
// tools/fixtures/make_generation_config_fixture.py with transformers as vLLM 0.32 uses it.
#include "common/api/sampling_defaults.h"

#include <fstream>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

constexpr char kFixture[] = "tests/data/generation_config/vllm_defaults.json";

// The defaults as {field: value}, fields named as vLLM names them.
std::map<std::string, double> AsMap(const v1::SamplingParams& d) {
  std::map<std::string, double> m;
  if (d.has_temperature()) m["temperature"] = d.temperature();
  if (d.has_top_p()) m["top_p"] = d.top_p();
  if (d.has_top_k()) m["top_k"] = d.top_k();
  if (d.has_min_p()) m["min_p"] = d.min_p();
  if (d.has_repetition_penalty()) m["repetition_penalty"] = d.repetition_penalty();
  if (d.has_presence_penalty()) m["presence_penalty"] = d.presence_penalty();
  if (d.has_frequency_penalty()) m["frequency_penalty"] = d.frequency_penalty();
  if (d.has_max_tokens()) m["max_tokens"] = d.max_tokens();
  return m;
}

TEST(SamplingDefaultsTest, TheDefaultsAreVllmsForRealAndMadeUpGenerationConfigs) {
  std::ifstream in(kFixture);
  ASSERT_TRUE(in.good()) << kFixture;
  const nlohmann::json fixture = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(fixture.is_object() && fixture["cases"].is_array());
  ASSERT_GE(fixture["cases"].size(), 10u);
  for (const nlohmann::json& c : fixture["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    v1::SamplingParams d;
    if (c["mode"] == "auto") {
      ASSERT_TRUE(
          MergeGenerationConfig(c["generation_config"].dump(), "generation_config.json", &d).ok());
    }
    if (!c["override"].is_null()) {
      ASSERT_TRUE(
          MergeGenerationConfig(c["override"].dump(), "--override-generation-config", &d).ok());
    }
    std::map<std::string, double> expected;
    for (const auto& [key, value] : c["expected"].items()) {
      // As the proto holds them: floats in single precision.
      expected[key] = key == "top_k" || key == "max_tokens"
                          ? value.get<double>()
                          : static_cast<double>(static_cast<float>(value.get<double>()));
    }
    EXPECT_EQ(AsMap(d), expected);
  }
}

TEST(SamplingDefaultsTest, ValuesNoRequestCouldUseAreRefusedAtStart) {
  for (const char* bad : {
           R"({"temperature": "0.7"})",     // a string
           R"({"temperature": -0.5})",      // below 0
           R"({"top_p": 1.5})",             // outside (0, 1]
           R"({"top_p": 0})",               //
           R"({"min_p": 2})",               // outside [0, 1]
           R"({"repetition_penalty": 0})",  // must be positive
           R"({"presence_penalty": 3})",    // outside [-2, 2]
           R"({"top_k": 20.5})",            // not an integer
           R"({"top_k": -2})",              // below -1
           R"({"top_k": 1000000000000})",   // past int32
           R"({"max_new_tokens": 0})",      // at least 1
           R"({"max_new_tokens": 18446744073709551615})",
           R"([0.7])",                         // not an object
           R"({"temperature": 0.7)",           // not JSON
           R"({"top_p": 0.9, "top_p": 0.8})",  // a key twice
       }) {
    SCOPED_TRACE(bad);
    v1::SamplingParams d;
    d.set_temperature(0.25f);
    const absl::Status s = MergeGenerationConfig(bad, "generation_config.json", &d);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("generation_config.json"), std::string_view::npos) << s;
    // Nothing of a refused file is taken.
    EXPECT_EQ(AsMap(d), (std::map<std::string, double>{{"temperature", 0.25}}));
  }
  v1::SamplingParams d;
  EXPECT_EQ(MergeGenerationConfig(std::string(kMaxGenerationConfigBytes + 1, ' '), "x", &d).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SamplingDefaultsTest, ARequestsOwnValuesWinAndTheRestComeFromTheModel) {
  v1::SamplingParams d;
  ASSERT_TRUE(MergeGenerationConfig(
                  R"({"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05,
                      "max_new_tokens": 64})",
                  "generation_config.json", &d)
                  .ok());
  v1::SamplingParams r;
  r.set_temperature(1.0f);  // set by the client, equal to the API's default: it stays
  r.set_top_k(-1);
  r.set_seed(7);
  ApplySamplingDefaults(d, &r);
  EXPECT_EQ(r.temperature(), 1.0f);
  EXPECT_EQ(r.top_k(), -1);
  EXPECT_EQ(r.top_p(), 0.8f);
  EXPECT_EQ(r.repetition_penalty(), 1.05f);
  EXPECT_EQ(r.seed(), 7u);
  EXPECT_FALSE(r.has_min_p());
  EXPECT_FALSE(r.has_presence_penalty());
  EXPECT_FALSE(r.has_max_tokens());  // depends on the prompt: the router's validation sets it
  EXPECT_EQ(DescribeSamplingDefaults(d),
            "temperature=0.7 top_p=0.8 top_k=20 repetition_penalty=1.05 max_tokens=64");
  EXPECT_EQ(DescribeSamplingDefaults(v1::SamplingParams()), "none");
}

}  // namespace
}  // namespace pagellm
