#include "worker/flags/speculative_config.h"

#include "gtest/gtest.h"

namespace pagellm::cli {
namespace {

TEST(SpeculativeConfigTest, ReadsVllmsSpelling) {
  auto o = ParseSpeculativeConfig(
      R"({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4,
          "prompt_lookup_min": 2, "disable_by_batch_size": 16})");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->num_speculative_tokens, 5);
  EXPECT_EQ(o->prompt_lookup_max, 4);
  EXPECT_EQ(o->prompt_lookup_min, 2);
  EXPECT_EQ(o->disable_by_batch_size, 16);
  EXPECT_TRUE(o->enabled());
  EXPECT_FALSE(ParseSpeculativeConfig("")->enabled());
}

TEST(SpeculativeConfigTest, FillsTheLookupBoundsAsVllmDoes) {
  auto both = ParseSpeculativeConfig(R"({"method": "ngram", "num_speculative_tokens": 3})");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->prompt_lookup_max, 5);
  EXPECT_EQ(both->prompt_lookup_min, 5);
  auto max_only = ParseSpeculativeConfig(
      R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4})");
  ASSERT_TRUE(max_only.ok());
  EXPECT_EQ(max_only->prompt_lookup_min, 4);
  auto min_only = ParseSpeculativeConfig(
      R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2})");
  ASSERT_TRUE(min_only.ok());
  EXPECT_EQ(min_only->prompt_lookup_max, 2);
}

TEST(SpeculativeConfigTest, RefusesWhatItDoesNotServe) {
  for (const char* bad : {
           R"({"method": "eagle", "num_speculative_tokens": 3})",
           R"({"model": "draft", "num_speculative_tokens": 3})",
           R"({"method": "ngram"})",
           R"({"num_speculative_tokens": 3})",
           R"({"method": "ngram", "num_speculative_tokens": -1})",
           R"({"method": "ngram", "num_speculative_tokens": 1.5})",
           R"({"method": "ngram", "num_speculative_tokens": 99})",
           R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 4,
               "prompt_lookup_max": 2})",
           R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 0})",
           R"({"method": "ngram", "num_speculative_tokens": 3, "method": "ngram"})",
           R"([1, 2])",
           "{",
       }) {
    auto o = ParseSpeculativeConfig(bad);
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace pagellm::cli
