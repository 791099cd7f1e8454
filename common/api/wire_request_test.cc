#include "common/api/wire_request.h"

#include <string>

#include "gtest/gtest.h"
#include "pagellm/v1/generation.pb.h"
#include "pagellm/v1/worker.pb.h"

namespace pagellm {
namespace {

// Hand-encoded length-delimited field: protobuf will not serialize invalid UTF-8 in a string.
std::string Field(int number, const std::string& payload) {
  std::string out(1, static_cast<char>(number << 3 | 2));
  size_t n = payload.size();
  while (n >= 0x80) {
    out.push_back(static_cast<char>(0x80 | (n & 0x7F)));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
  return out + payload;
}

const std::string kBad = "\xff\xfe";

TEST(WireRequestTest, ParsesValidMessages) {
  v1::TokenizeRequest r;
  r.mutable_chat()->add_messages()->set_content("héllo");
  v1::TokenizeRequest parsed;
  ASSERT_TRUE(ParseRequestWire(r.SerializeAsString(), &parsed).ok());
  EXPECT_EQ(parsed.chat().messages(0).content(), "héllo");
}

// Issue 9: Tokenize and the worker's Generate name the bad field like the router's Generate.
TEST(WireRequestTest, NamesTheFirstFieldThatIsNotUtf8) {
  struct Case {
    std::string wire;
    google::protobuf::Message* message;
    std::string name;
  };
  v1::TokenizeRequest tokenize;
  v1::WorkerGenerateRequest worker;
  v1::GenerateRequest generate;
  const Case cases[] = {
      {Field(1, kBad), &tokenize, "text"},
      {Field(2, Field(1, Field(1, "user")) + Field(1, Field(2, kBad))), &tokenize,
       "chat.messages[1].content"},
      {Field(1, kBad), &worker, "request_id"},
      {Field(3, Field(12, "ok") + Field(12, kBad)), &worker, "sampling.stop[1]"},
      {Field(5, Field(12, kBad)), &generate, "sampling.stop[0]"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ParseRequestWire(c.wire, c.message);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(s.message(), c.name + " is not valid UTF-8");
  }
}

TEST(WireRequestTest, GarbageIsNotTheMessage) {
  v1::DetokenizeRequest detokenize;
  const absl::Status s = ParseRequestWire(std::string("\xff\xff\xff", 3), &detokenize);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "the request is not a pagellm.v1.DetokenizeRequest");
  // A length running past the end.
  v1::WorkerGenerateRequest worker;
  EXPECT_EQ(ParseRequestWire(std::string("\x0a\x10x", 3), &worker).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WireRequestTest, UnknownFieldsAndBytesAreSkipped) {
  v1::DetokenizeRequest detokenize;
  // Field 9 is unknown: its payload is not looked at.
  EXPECT_TRUE(ParseRequestWire(Field(9, kBad), &detokenize).ok());
}

}  // namespace
}  // namespace pagellm
