#include "worker/server/generation_defaults.h"

#include <string>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

constexpr char kLlama[] = R"({"bos_token_id": 128000, "do_sample": true,
  "eos_token_id": [128001, 128008, 128009], "temperature": 0.6, "top_p": 0.9})";

// A directory "tuned" holding a generation_config.json; nothing anywhere else.
absl::StatusOr<std::optional<std::string>> Read(const std::string& dir) {
  if (dir == "tuned") return std::optional<std::string>(R"({"top_k": 5, "max_new_tokens": 40})");
  return std::optional<std::string>();
}

TEST(GenerationDefaultsTest, AutoTakesTheCheckpointsFileAndTheOverrideOnTop) {
  auto d = ResolveGenerationDefaults("auto", "", std::string(kLlama), Read);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FLOAT_EQ(d->sampling.temperature(), 0.6f);
  EXPECT_FLOAT_EQ(d->sampling.top_p(), 0.9f);
  EXPECT_FALSE(d->sampling.has_top_k());
  EXPECT_EQ(d->max_tokens_limit, 0);
  EXPECT_EQ(d->source, "the model's generation_config.json");

  d = ResolveGenerationDefaults("auto", R"({"temperature": 0.2, "max_new_tokens": 100})",
                                std::string(kLlama), Read);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FLOAT_EQ(d->sampling.temperature(), 0.2f);
  EXPECT_FLOAT_EQ(d->sampling.top_p(), 0.9f);
  EXPECT_EQ(d->sampling.max_tokens(), 100);
  EXPECT_EQ(d->max_tokens_limit, 100) << "the override's max_new_tokens caps every request";

  // A model file's own max_new_tokens is a default only.
  d = ResolveGenerationDefaults("auto", "", std::string(R"({"max_new_tokens": 64})"), Read);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sampling.max_tokens(), 64);
  EXPECT_EQ(d->max_tokens_limit, 0);

  // GGUF: no file.
  d = ResolveGenerationDefaults("auto", "", std::nullopt, Read);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sampling.ByteSizeLong(), 0u);
  EXPECT_EQ(d->source, "none");
}

TEST(GenerationDefaultsTest, VllmModeIgnoresTheFile) {
  auto d = ResolveGenerationDefaults("vllm", "", std::string(kLlama), Read);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sampling.ByteSizeLong(), 0u);
  d = ResolveGenerationDefaults("vllm", R"({"top_p": 0.5})", std::string(kLlama), Read);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FLOAT_EQ(d->sampling.top_p(), 0.5f);
  EXPECT_FALSE(d->sampling.has_temperature());
  EXPECT_EQ(d->source, "--override-generation-config");
}

TEST(GenerationDefaultsTest, ADirectorysFileReplacesTheModelsAndItsMaxNewTokensCaps) {
  auto d = ResolveGenerationDefaults("tuned", "", std::string(kLlama), Read);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->sampling.has_temperature());
  EXPECT_EQ(d->sampling.top_k(), 5);
  EXPECT_EQ(d->sampling.max_tokens(), 40);
  EXPECT_EQ(d->max_tokens_limit, 40);
  EXPECT_EQ(d->source, "tuned/generation_config.json");
  const auto missing = ResolveGenerationDefaults("elsewhere", "", std::nullopt, Read);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("elsewhere"), std::string_view::npos);
}

TEST(GenerationDefaultsTest, BadFilesAndOverridesStopTheStart) {
  EXPECT_EQ(
      ResolveGenerationDefaults("auto", "", std::string(R"({"top_p": 7})"), Read).status().code(),
      absl::StatusCode::kInvalidArgument);
  const auto bad = ResolveGenerationDefaults("auto", "{temperature: 1}", std::nullopt, Read);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--override-generation-config"), std::string_view::npos);
  EXPECT_EQ(ResolveGenerationDefaults("", "", std::nullopt, Read).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagellm
