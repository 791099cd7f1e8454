#include "common/json/strict_json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;

void ExpectRejected(std::string_view text, std::string_view fragment,
                    const StrictJsonOptions& options = StrictJsonOptions()) {
  auto json = ParseStrictJson(text, options);
  ASSERT_FALSE(json.ok()) << text.substr(0, 80);
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(json.status().message()), HasSubstr(std::string(fragment)));
}

TEST(StrictJsonTest, ParsesAndKeepsKeyOrder) {
  auto json = ParseStrictJson(R"({"b":1,"a":[true,null,"x"],"c":{"b":2}})");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->begin().key(), "b");
  EXPECT_EQ((*json)["a"][2], "x");
  EXPECT_EQ((*json)["c"]["b"], 2);
}

TEST(StrictJsonTest, SameKeyInDifferentObjectsIsFine) {
  EXPECT_TRUE(ParseStrictJson(R"({"a":{"k":1},"b":{"k":2},"c":[{"k":1},{"k":2}]})").ok());
}

TEST(StrictJsonTest, RejectsDuplicateKeysAtAnyLevel) {
  ExpectRejected(R"({"a":1,"a":2})", "duplicate key 'a'");
  ExpectRejected(R"({"x":[{"k":1,"k":1}]})", "duplicate key 'k'");
}

TEST(StrictJsonTest, RejectsInvalidText) {
  ExpectRejected("", "not valid JSON");
  ExpectRejected("{} {}", "not valid JSON");
  ExpectRejected("{\"a\":\"\xc3\x28\"}", "not valid JSON");  // bad UTF-8
  ExpectRejected("[1e999]", "not valid JSON");               // number out of range
}

TEST(StrictJsonTest, StopsAtTheDepthCap) {
  StrictJsonOptions options;
  options.max_depth = 2;
  EXPECT_TRUE(ParseStrictJson("[[1]]", options).ok());
  ExpectRejected("[[[1]]]", "nested deeper than 2", options);
  // Far too deep to build: must fail fast rather than allocate a million containers.
  ExpectRejected(std::string(1 << 20, '['), "nested deeper than 16");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += R"({"k":)";
  ExpectRejected(objects, "nested deeper than 16");
}

}  // namespace
}  // namespace pagellm
