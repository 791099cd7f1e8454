// HttpServer's exchange life cycle as a handler sees it: a listener hears that the client left,
// whether it was set before or after the client went; Options::on_complete records each
// exchange once it is over.
#include "router/http/http_server.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "gtest/gtest.h"
#include "router/http/access_log.h"
#include "router/testing/fake_worker.h"

namespace pagellm {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using testing::WaitFor;

// Keeps every exchange unanswered.
class HoldingHandler final : public HttpHandler {
 public:
  void Handle(HttpRequest, std::shared_ptr<HttpExchange> exchange) override {
    absl::MutexLock lock(&mu_);
    exchanges_.push_back(std::move(exchange));
  }
  size_t size() {
    absl::MutexLock lock(&mu_);
    return exchanges_.size();
  }
  std::shared_ptr<HttpExchange> at(size_t i) {
    absl::MutexLock lock(&mu_);
    return exchanges_.at(i);
  }

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<HttpExchange>> exchanges_ ABSL_GUARDED_BY(mu_);
};

struct CountingListener final : HttpExchange::Listener {
  void OnSent(bool) override { ++sent; }
  void OnClosed() override { ++closed; }
  std::atomic<int> sent{0};
  std::atomic<int> closed{0};
};

// Connects and sends one request that the handler holds.
void SendRequest(tcp::socket& socket, int port) {
  socket.connect(tcp::endpoint(net::ip::address_v4::loopback(), static_cast<uint16_t>(port)));
  http::request<http::string_body> req{http::verb::post, "/x", 11};
  req.set(http::field::host, "127.0.0.1");
  req.body() = "{}";
  req.prepare_payload();
  http::write(socket, req);
}

TEST(HttpServerTest, AListenerHearsTheClientLeaveEvenIfSetAfterItLeft) {
  HoldingHandler handler;
  HttpServer::Options o;
  o.port = 0;
  o.threads = 1;
  auto server = HttpServer::Start(o, &handler);
  ASSERT_TRUE(server.ok()) << server.status();
  net::io_context ioc;

  // Set while the client is connected: OnClosed when it leaves, not before.
  tcp::socket first(ioc);
  SendRequest(first, (*server)->port());
  ASSERT_TRUE(WaitFor([&] { return handler.size() == 1; }));
  auto before = std::make_shared<CountingListener>();
  handler.at(0)->SetListener(before);
  EXPECT_EQ(before->closed, 0);
  first.close();
  EXPECT_TRUE(WaitFor([&] { return before->closed == 1; }));

  // Set after the client left: OnClosed at once, inside SetListener (a handler that listens
  // late must not wait forever for a client that is gone).
  tcp::socket second(ioc);
  SendRequest(second, (*server)->port());
  ASSERT_TRUE(WaitFor([&] { return handler.size() == 2; }));
  second.close();
  ASSERT_TRUE(WaitFor([&] { return (*server)->connections() == 0; }));
  auto late = std::make_shared<CountingListener>();
  handler.at(1)->SetListener(late);
  EXPECT_EQ(late->closed, 1);
  EXPECT_EQ(late->sent, 0);

  (*server)->Stop();
  EXPECT_EQ(before->closed, 1) << "called at most once";
}

// Answers /reply whole (201, "hello"), streams /stream ("abc" in one chunk), holds the rest.
class AnsweringHandler final : public HttpHandler {
 public:
  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override {
    if (request.path == "/reply") {
      exchange->Reply(201, "text/plain", "hello");
    } else if (request.path == "/stream") {
      exchange->StartStream(200, "text/plain");
      std::string chunk = "abc";
      exchange->Send(&chunk);
      exchange->EndStream();
    } else {
      absl::MutexLock lock(&mu_);
      held_.push_back(std::move(exchange));
    }
  }
  size_t held() {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<HttpExchange>> held_ ABSL_GUARDED_BY(mu_);
};

struct Record {
  std::string method, path, line;
  int status;
  uint64_t bytes;
  bool completed;
  double ms;
};

class AccessLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServer::Options o;
    o.port = 0;
    o.threads = 1;
    o.max_body_bytes = 64;
    o.on_complete = [this](const HttpAccess& a) {
      absl::MutexLock lock(&mu_);
      records_.push_back({std::string(a.method), std::string(a.path), FormatAccess(a), a.status,
                          a.body_bytes, a.completed, absl::ToDoubleMilliseconds(a.duration)});
    };
    auto server = HttpServer::Start(o, &handler_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override { server_->Stop(); }

  // Sends one request on a new connection; reads the answer unless `read` is false.
  void Send(tcp::socket& socket, const std::string& target, std::string body, bool read = true) {
    socket.connect(
        tcp::endpoint(net::ip::address_v4::loopback(), static_cast<uint16_t>(server_->port())));
    http::request<http::string_body> req{http::verb::post, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.body() = std::move(body);
    req.prepare_payload();
    http::write(socket, req);
    if (!read) return;
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
  }
  std::vector<Record> records() {
    absl::MutexLock lock(&mu_);
    return records_;
  }

  AnsweringHandler handler_;
  std::unique_ptr<HttpServer> server_;
  net::io_context ioc_;
  absl::Mutex mu_;
  std::vector<Record> records_ ABSL_GUARDED_BY(mu_);
};

TEST_F(AccessLogTest, EachExchangeIsRecordedOnceWhenItIsOver) {
  tcp::socket whole(ioc_), streamed(ioc_), left(ioc_), too_big(ioc_);
  Send(whole, "/reply?key=secret", "{}");
  ASSERT_TRUE(WaitFor([&] { return records().size() == 1; }));
  Send(streamed, "/stream", "{}");
  ASSERT_TRUE(WaitFor([&] { return records().size() == 2; }));
  Send(left, "/hold", "{}", /*read=*/false);
  ASSERT_TRUE(WaitFor([&] { return handler_.held() == 1; }));
  EXPECT_EQ(records().size(), 2u) << "an exchange still being answered is not recorded";
  left.close();
  ASSERT_TRUE(WaitFor([&] { return records().size() == 3; }));
  Send(too_big, "/reply", std::string(100, 'x'));  // over max_body_bytes: the server's 413
  ASSERT_TRUE(WaitFor([&] { return records().size() == 4; }));

  const std::vector<Record> r = records();
  EXPECT_EQ(r[0].method, "POST");
  EXPECT_EQ(r[0].path, "/reply") << "no query string: it may hold secrets";
  EXPECT_EQ(r[0].status, 201);
  EXPECT_EQ(r[0].bytes, 5u);
  EXPECT_TRUE(r[0].completed);
  EXPECT_GE(r[0].ms, 0.0);
  EXPECT_EQ(r[1].path, "/stream");
  EXPECT_EQ(r[1].status, 200);
  EXPECT_EQ(r[1].bytes, 3u);
  EXPECT_TRUE(r[1].completed);
  EXPECT_EQ(r[2].path, "/hold");
  EXPECT_EQ(r[2].status, 0) << "no response was started";
  EXPECT_FALSE(r[2].completed);
  EXPECT_NE(r[2].line.find("client left"), std::string::npos) << r[2].line;
  EXPECT_EQ(r[3].method, "-");
  EXPECT_EQ(r[3].status, 413);
  EXPECT_TRUE(r[3].completed);
  EXPECT_EQ(records().size(), 4u);
}

}  // namespace
}  // namespace pagellm
