// RouterServer::Start on ports that are already taken: a clear error at start, never a second
// server sharing a port with the first.
#include "router/router_server.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/testing/fake_worker.h"

namespace pagellm {
namespace {

using testing::FakeWorker;
using ::testing::HasSubstr;

RouterServer::Options Options(const FakeWorker& worker) {
  RouterServer::Options o;
  o.listen_address = "127.0.0.1:0";
  o.metrics_address = "";  // the exposer takes 2 s to stop
  o.http.host = "127.0.0.1";
  o.http.port = 0;
  o.workers.addresses.push_back(worker.address());
  return o;
}

TEST(RouterServerTest, APortInUseIsAnErrorAtStartNotShared) {
  std::unique_ptr<FakeWorker> worker = FakeWorker::Start({});
  auto first = RouterServer::Start(Options(*worker));
  ASSERT_TRUE(first.ok()) << first.status();

  RouterServer::Options grpc_taken = Options(*worker);
  grpc_taken.listen_address = absl::StrCat("127.0.0.1:", (*first)->port());
  auto second = RouterServer::Start(std::move(grpc_taken));
  ASSERT_FALSE(second.ok()) << "a second router started on a gRPC port in use";
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("cannot listen on 127.0.0.1:"));

  RouterServer::Options http_taken = Options(*worker);
  http_taken.http.port = (*first)->http_port();
  auto third = RouterServer::Start(std::move(http_taken));
  ASSERT_FALSE(third.ok()) << "a second router started on an HTTP port in use";
  EXPECT_EQ(third.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(third.status().message(), HasSubstr("cannot listen on 127.0.0.1:"));
}

}  // namespace
}  // namespace pagellm
