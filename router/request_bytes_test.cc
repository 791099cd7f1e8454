#include "router/request_bytes.h"

#include <string>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

TEST(RequestBytesTest, ParsesAValidRequest) {
  v1::GenerateRequest r;
  r.set_request_id("id-1");
  r.set_text("héllo");
  r.mutable_sampling()->set_max_tokens(3);
  r.mutable_sampling()->add_stop("\n");
  auto parsed = ParseGenerateRequest(r.SerializeAsString());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->text(), "héllo");
  EXPECT_EQ(parsed->sampling().max_tokens(), 3);
}

TEST(RequestBytesTest, NamesTheFieldWithInvalidUtf8) {
  // Hand-encoded: protobuf will not serialize a string field holding invalid UTF-8.
  const std::string bad = "\xff\xfe";
  auto field = [&](int number, const std::string& payload) {
    return std::string(1, static_cast<char>(number << 3 | 2)) +
           std::string(1, static_cast<char>(payload.size())) + payload;
  };
  const std::string message = field(1, "user");
  struct Case {
    std::string wire;
    std::string name;
  } cases[] = {
      {field(2, bad), "text"},
      {field(1, bad), "request_id"},
      {field(4, field(1, field(1, "user") + field(2, bad))), "chat.messages[0].content"},
      {field(4, field(1, field(1, bad))), "chat.messages[0].role"},
      {field(5, std::string(1, static_cast<char>(12 << 3 | 2)) + "\x02" + bad), "sampling.stop[0]"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseGenerateRequest(c.wire);
    ASSERT_FALSE(parsed.ok()) << c.name;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), c.name + " is not valid UTF-8");
  }
  (void)message;
}

TEST(RequestBytesTest, RejectsGarbage) {
  EXPECT_EQ(ParseGenerateRequest(std::string("\xff\xff\xff", 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagellm
