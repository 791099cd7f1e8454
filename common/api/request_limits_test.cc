#include "common/api/request_limits.h"

#include <string>

#include "common/api/proto_convert.h"
#include "common/utf8.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

TEST(RequestLimitsTest, ShortValuesAreQuotedWhole) {
  EXPECT_EQ(QuoteClientValue("user"), "\"user\"");
}

TEST(RequestLimitsTest, LongValuesAreQuotedByAPrefixAndTheirSize) {
  const std::string role(2 << 20, 'r');
  const std::string q = QuoteClientValue(role);
  EXPECT_LT(q.size(), kMaxQuotedBytes + 32);
  EXPECT_NE(q.find("(2097152 bytes)"), std::string::npos) << q;
}

TEST(RequestLimitsTest, CutsNeverSplitACharacter) {
  std::string s;
  for (int i = 0; i < 1000; ++i) s += "é";  // 2 bytes each, so some cut lands mid-character
  for (size_t pad = 0; pad < 2; ++pad) {
    const std::string v = std::string(pad, 'x') + s;
    EXPECT_TRUE(IsValidUtf8(std::string_view(QuoteClientValue(v))));
    EXPECT_TRUE(IsValidUtf8(std::string_view(BoundedErrorMessage(v))));
    EXPECT_LE(BoundedErrorMessage(v).size(), kMaxErrorMessageBytes);
  }
}

// Issue 9: an error that quotes a huge client value must still fit gRPC's metadata limit
// (8 KiB by default), or the client sees RESOURCE_EXHAUSTED instead of the real error.
TEST(RequestLimitsTest, GrpcStatusMessagesAreBounded) {
  const absl::Status s = absl::InvalidArgumentError(std::string(3 << 20, 'm'));
  const grpc::Status g = ToGrpcStatus(s);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(g.error_message().size(), kMaxErrorMessageBytes);
}

TEST(RequestLimitsTest, CheckMaxBytesNamesTheField) {
  EXPECT_TRUE(CheckMaxBytes("abc", 3, "request_id").ok());
  const absl::Status s = CheckMaxBytes("abcd", 3, "request_id");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "request_id is 4 bytes long; the limit is 3");
}

}  // namespace
}  // namespace pagellm
