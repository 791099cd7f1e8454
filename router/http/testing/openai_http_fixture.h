// The fixture of the OpenAI-compatible HTTP API's end-to-end tests
// (router/http/openai_frontend*_test.cc): a RouterServer with its HTTP port in front of
// in-process fake workers, called over real sockets by a small Beast client.
#ifndef PAGELLM_ROUTER_HTTP_TESTING_OPENAI_HTTP_FIXTURE_H_
#define PAGELLM_ROUTER_HTTP_TESTING_OPENAI_HTTP_FIXTURE_H_

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pagellm/v1/generation.grpc.pb.h"
#include "router/http/openai_request.h"
#include "router/router_server.h"
#include "router/testing/fake_worker.h"

namespace pagellm::openai_test {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Json = nlohmann::json;
using testing::FakeWorker;
using ::testing::HasSubstr;
using testing::WaitFor;

struct HttpResult {
  int status = 0;
  std::string body;
  std::string content_type;
};

// Connects `socket` to the router and writes one request; the answer is left unread.
inline void Send(tcp::socket& socket, int port, http::verb method, const std::string& target,
                 const std::string& body = "", const std::string& authorization = "") {
  socket.connect(tcp::endpoint(net::ip::address_v4::loopback(), static_cast<uint16_t>(port)));
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  if (!authorization.empty()) req.set(http::field::authorization, authorization);
  req.body() = body;
  req.prepare_payload();
  http::write(socket, req);
}

// One request on a new connection.
inline HttpResult Call(int port, http::verb method, const std::string& target,
                       const std::string& body = "", const std::string& authorization = "") {
  net::io_context ioc;
  tcp::socket socket(ioc);
  Send(socket, port, method, target, body, authorization);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  beast::error_code ec;
  http::read(socket, buffer, parser, ec);
  HttpResult out;
  if (ec) return out;
  out.status = static_cast<int>(parser.get().result_int());
  out.body = parser.get().body();
  out.content_type = std::string(parser.get()[http::field::content_type]);
  return out;
}

inline HttpResult Post(int port, const std::string& target, const Json& body) {
  return Call(port, http::verb::post, target, body.dump());
}

// The JSON of each "data: " event of a server-sent event stream; "[DONE]" as a string.
inline std::vector<Json> Events(const std::string& body) {
  std::vector<Json> out;
  for (absl::string_view event : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(event, "data: ")) << event;
    absl::string_view data = event.substr(6);
    out.push_back(data == "[DONE]" ? Json("[DONE]") : Json::parse(data));
  }
  return out;
}

class OpenAiFrontendTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (router_ != nullptr) router_->Shutdown(absl::ZeroDuration());
  }

  FakeWorker& AddWorker(FakeWorker::Options o = {}) {
    workers_.push_back(FakeWorker::Start(std::move(o)));
    return *workers_.back();
  }

  void StartRouter(size_t max_queue = 1024, size_t max_body = 1 << 20,
                   std::shared_ptr<ReloadableSecrets> keys = nullptr,
                   OpenAiFrontend::Options openai = {}) {
    RouterServer::Options o;
    o.openai = std::move(openai);
    o.api_keys = std::move(keys);
    o.listen_address = "127.0.0.1:0";
    for (const auto& w : workers_) o.workers.addresses.push_back(w->address());
    o.poll_interval = absl::Milliseconds(20);
    o.request_timeout = absl::Seconds(20);
    o.max_queue = max_queue;
    o.http.port = 0;
    o.http.max_body_bytes = max_body;
    o.allow_runtime_lora_updating = runtime_lora_;
    auto r = RouterServer::Start(std::move(o));
    ASSERT_TRUE(r.ok()) << r.status();
    router_ = *std::move(r);
    ASSERT_GT(router_->http_port(), 0);
    stub_ = v1::Generation::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", router_->port()),
                                                        grpc::InsecureChannelCredentials()));
    ASSERT_TRUE(WaitFor([&] { return router_->serving(); }));
  }

  // The text the gRPC API streams for `request`.
  std::string GrpcText(const v1::GenerateRequest& request) {
    grpc::ClientContext context;
    auto reader = stub_->Generate(&context, request);
    std::string text;
    v1::GenerateResponse m;
    while (reader->Read(&m)) {
      for (const auto& d : m.deltas()) text += d.text();
    }
    EXPECT_TRUE(reader->Finish().ok());
    return text;
  }

  int port() const { return router_->http_port(); }

  bool runtime_lora_ = false;  // RouterServer::Options::allow_runtime_lora_updating
  std::vector<std::unique_ptr<FakeWorker>> workers_;
  std::unique_ptr<RouterServer> router_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

}  // namespace pagellm::openai_test

#endif  // PAGELLM_ROUTER_HTTP_TESTING_OPENAI_HTTP_FIXTURE_H_
