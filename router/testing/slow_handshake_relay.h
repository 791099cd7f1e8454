// SlowHandshakeRelay: a TCP relay for tests, on loopback, that delays each connection's
// handshake (see the class comment). Header-only; uses Boost.Asio.
#ifndef PAGELLM_ROUTER_TESTING_SLOW_HANDSHAKE_RELAY_H_
#define PAGELLM_ROUTER_TESTING_SLOW_HANDSHAKE_RELAY_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "boost/asio.hpp"

namespace pagellm::testing {

// A TCP relay on loopback in front of `upstream` ("127.0.0.1:port") that holds each accepted
// connection for `delay` before passing bytes either way: a worker whose connection handshake
// (TCP, TLS, HTTP/2 settings) takes that long, as over a slow or congested network.
class SlowHandshakeRelay {
 public:
  SlowHandshakeRelay(const std::string& upstream, std::chrono::milliseconds delay)
      : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}), delay_(delay) {
    const size_t colon = upstream.rfind(':');
    upstream_ = {boost::asio::ip::make_address(upstream.substr(0, colon)),
                 static_cast<uint16_t>(std::stoi(upstream.substr(colon + 1)))};
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~SlowHandshakeRelay() {
    io_.stop();
    thread_.join();
  }
  std::string address() const {
    return absl::StrCat("127.0.0.1:", acceptor_.local_endpoint().port());
  }

 private:
  using Socket = boost::asio::ip::tcp::socket;
  struct Link {
    explicit Link(boost::asio::io_context& io) : client(io), server(io), timer(io) {}
    Socket client, server;
    boost::asio::steady_timer timer;
    std::array<char, 16384> up, down;
  };

  void Accept() {
    auto link = std::make_shared<Link>(io_);
    acceptor_.async_accept(link->client, [this, link](boost::system::error_code ec) {
      if (ec) return;
      link->timer.expires_after(delay_);
      link->timer.async_wait([this, link](boost::system::error_code) {
        link->server.async_connect(upstream_, [link](boost::system::error_code ec) {
          if (ec) return;
          Pump(link, &link->client, &link->server, &link->up);
          Pump(link, &link->server, &link->client, &link->down);
        });
      });
      Accept();
    });
  }

  // Copies from -> to until either side closes, then closes both.
  static void Pump(std::shared_ptr<Link> link, Socket* from, Socket* to,
                   std::array<char, 16384>* buf) {
    from->async_read_some(boost::asio::buffer(*buf), [=](boost::system::error_code ec, size_t n) {
      if (ec) {
        boost::system::error_code ignored;
        to->close(ignored);
        return;
      }
      boost::asio::async_write(*to, boost::asio::buffer(*buf, n),
                               [=](boost::system::error_code ec, size_t) {
                                 if (ec) {
                                   boost::system::error_code ignored;
                                   from->close(ignored);
                                   return;
                                 }
                                 Pump(link, from, to, buf);
                               });
    });
  }

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::ip::tcp::endpoint upstream_;
  std::chrono::milliseconds delay_;
  std::thread thread_;
};

}  // namespace pagellm::testing

#endif  // PAGELLM_ROUTER_TESTING_SLOW_HANDSHAKE_RELAY_H_
