// HttpServer's exchange life cycle as a handler sees it: a listener hears that the client left,
// whether it was set before or after the client went.
#include "router/http/http_server.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "gtest/gtest.h"
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

}  // namespace
}  // namespace pagellm
