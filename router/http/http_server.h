// HttpServer: an asynchronous HTTP/1.1 server (Boost.Beast over Asio, optionally TLS through
// OpenSSL) that hands each request to an HttpHandler together with an HttpExchange, the
// request's response side. It knows nothing of what it serves.
//
// Limits (Options): connections (more are closed at accept), header bytes (431), body bytes
// (413, answered as soon as the header announces more, before the body is read), the time a
// client may take to send a request (408 / close) and to take one write. Errors the server
// answers itself get a JSON body from Options::error_body.
//
// A connection has one exchange at a time (HTTP/1.1, no pipelining in parallel). While its
// response is pending the connection keeps reading, so a client that disconnects is noticed at
// once (HttpExchange::Listener::OnClosed), not at the next write.
//
// Options::on_complete hears of every exchange once it is over (an access log): answered, or
// left by its client or closed before its response was complete.
//
// Threads: Options::threads I/O threads run every connection; the handler, the listeners and
// on_complete are called on them and must not block. Thread-safe: HttpExchange may be called from
// any thread.
#ifndef PAGELLM_ROUTER_HTTP_HTTP_SERVER_H_
#define PAGELLM_ROUTER_HTTP_HTTP_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pagellm {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query string
  std::string body;
  std::string authorization;  // the Authorization header ("" when absent)
  std::string content_type;
  std::string peer;  // "ip:port" of the client
};

// The response side of one request. Exactly one of Reply or StartStream ... EndStream.
class HttpExchange {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // The chunk of the last Send is written (ok) or cannot be (the client is gone).
    virtual void OnSent(bool ok) = 0;
    // The client went away before the response was complete. Called at most once.
    virtual void OnClosed() = 0;
  };

  virtual ~HttpExchange() = default;

  // Events of this exchange go to `listener` (held until the response is complete or the
  // connection closes). Set it before StartStream; optional for Reply. When the client has left
  // already, listener->OnClosed() runs at once, inside this call.
  virtual void SetListener(std::shared_ptr<Listener> listener) = 0;
  // A complete response. `extra_headers` are "Name: value\r\n" lines (may be empty).
  virtual void Reply(int status, std::string_view content_type, std::string body,
                     std::string_view extra_headers = {}) = 0;
  // A chunked response: the status and headers now, then Send()s, then EndStream().
  virtual void StartStream(int status, std::string_view content_type) = 0;
  // Sends `*data` as one chunk. *data is swapped with the server's spent buffer, so the caller
  // gets back a cleared string with capacity (no allocation per chunk in the steady state).
  // REQUIRES: StartStream was called, no Send is outstanding (wait for OnSent).
  virtual void Send(std::string* data) = 0;
  // Ends the chunked response (after the outstanding Send, if any).
  virtual void EndStream() = 0;
};

// One exchange, as an access log records it. The views are valid during the call only.
struct HttpAccess {
  std::string_view peer;
  std::string_view method;  // "-" when the server answered before it had a request line
  std::string_view path;    // the target without its query string, at most kMaxPathBytes
  int status = 0;           // 0: no response was started
  uint64_t body_bytes = 0;  // response body bytes handed to the connection
  absl::Duration duration;  // from the whole request read to the exchange's end
  bool completed = false;   // the whole response was written
  static constexpr size_t kMaxPathBytes = 256;
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Called on an I/O thread; must not block. `exchange` stays valid while referenced.
  virtual void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) = 0;
};

class HttpServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 8000;  // 0 picks a free port
    int threads = 2;
    size_t max_connections = 4096;
    size_t max_header_bytes = 64 << 10;
    size_t max_body_bytes = 8 << 20;
    absl::Duration read_timeout = absl::Seconds(30);   // to receive one whole request
    absl::Duration write_timeout = absl::Seconds(60);  // to take one response write
    absl::Duration idle_timeout = absl::Seconds(60);   // keep-alive between requests
    // TLS when both are set: PEM files. Plaintext connections then fail the handshake.
    std::string tls_cert_file;
    std::string tls_key_file;
    // The body of the errors the server answers itself (413, 431, 400, 408, 503).
    std::function<std::string(int status, std::string_view message)> error_body;
    // Called once per exchange when it is over (see the file comment); empty: nothing.
    std::function<void(const HttpAccess&)> on_complete;
  };

  // Binds, then serves with `handler` (borrowed; it must outlive Stop()). InvalidArgument for
  // bad options or unreadable TLS files, Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(Options options, HttpHandler* handler);
  // Stop() if not yet called.
  virtual ~HttpServer() = default;

  [[nodiscard]] virtual int port() const = 0;
  // Connections open now.
  [[nodiscard]] virtual size_t connections() const = 0;
  // Stops accepting and closes every connection, then joins the I/O threads. The handler's
  // exchanges may still be referenced; their calls then do nothing. Idempotent.
  virtual void Stop() = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_HTTP_SERVER_H_
