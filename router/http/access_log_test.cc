// FormatAccess: the access log's line (HttpServer's records are tested in http_server_test.cc).
#include "router/http/access_log.h"

#include "gtest/gtest.h"

namespace pagellm {
namespace {

TEST(FormatAccessTest, WritesTheRequestLineWithBytesOutsidePrintableAsciiEscaped) {
  HttpAccess a;
  a.peer = "10.0.0.7:51512";
  a.method = "POST";
  a.path = "/v1/x\"y\\z\n\xc3\xa9";
  a.status = 200;
  a.body_bytes = 1834;
  a.duration = absl::Microseconds(412700);
  a.completed = true;
  EXPECT_EQ(FormatAccess(a),
            "access 10.0.0.7:51512 \"POST /v1/x\\x22y\\x5cz\\x0a\\xc3\\xa9\" 200 1834 B 412.7 ms");
  a.completed = false;
  a.method = "-";
  a.path = "";
  a.status = 0;
  a.body_bytes = 0;
  EXPECT_EQ(FormatAccess(a), "access 10.0.0.7:51512 \"-\" 0 0 B 412.7 ms client left");
}

}  // namespace
}  // namespace pagellm
