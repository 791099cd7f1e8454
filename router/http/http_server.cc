// Design. Every connection is a Session on its own strand; a session alternates between reading
// one request (header, then the body once the limits allow it) and answering it through an
// Exchange. While an exchange is open the session keeps one read outstanding on the socket
// (the "watch" read): bytes a client sends early are kept for the next request, and an end of
// stream or an error means the client left, which the exchange's listener hears at once. After
// the response, that same read waits for the next request on a keep-alive connection.
//
// Ownership. Sessions are owned by their own outstanding operations (shared_from_this); the
// Core (the io_context) is owned by the server and by every Exchange, because a handler may
// hold an exchange past Stop(). What Exchange posts to a strand captures only weak pointers, so
// nothing queued on a stopped io_context keeps anything alive. Stop() closes the acceptor and
// every session; the I/O threads return once no operation is left.
//
// Timers: the stream's read timer bounds reading a request (read_timeout) and is off for the
// watch read; the write timer bounds each write (write_timeout); idle_timer bounds the wait for
// the next request on a keep-alive connection.
#include "router/http/http_server.h"

#include <atomic>
#include <cstdio>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/ssl.hpp"
#include "common/logging.h"

namespace pagellm {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Strand = net::strand<net::io_context::executor_type>;

constexpr size_t kWatchReadBytes = 4096;
constexpr size_t kDrainReadBytes = 64 << 10;
// The most a lingering close reads (whatever the declared body): it also stops after 2 s.
constexpr uint64_t kMaxLingerBytes = uint64_t{1} << 30;

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(d);
}

std::string DefaultErrorBody(int status, std::string_view message) {
  return absl::StrCat("{\"error\": {\"code\": ", status, ", \"message\": \"", std::string(message),
                      "\"}}");
}

// What the server, every session and every exchange share. Outlives the I/O threads.
struct Core {
  explicit Core(const HttpServer::Options& o) : options(o), ioc(o.threads) {}
  const HttpServer::Options options;
  net::io_context ioc;
  std::optional<ssl::context> tls;  // set when serving TLS
};

class SessionBase;

// One request's response side; see HttpExchange. State shared between the handler's threads
// and the session's strand is under mu_.
class Exchange final : public HttpExchange {
 public:
  Exchange(std::shared_ptr<Core> core, Strand strand, std::weak_ptr<SessionBase> session)
      : core_(std::move(core)), strand_(std::move(strand)), session_(std::move(session)) {}

  void SetListener(std::shared_ptr<Listener> listener) override {
    {
      absl::MutexLock lock(&mu_);
      if (!closed_) {
        if (!complete_) listener_ = std::move(listener);
        return;
      }
    }
    if (listener != nullptr) listener->OnClosed();  // the client left before it listened
  }
  void Reply(int status, std::string_view content_type, std::string body,
             std::string_view extra_headers) override;
  void StartStream(int status, std::string_view content_type) override;
  void Send(std::string* data) override;
  void EndStream() override;

  // Session side (its strand).
  // The listener, released: the response is complete or the client left.
  std::shared_ptr<Listener> Finish(bool closed) {
    absl::MutexLock lock(&mu_);
    (closed ? closed_ : complete_) = true;
    return std::move(listener_);
  }
  std::shared_ptr<Listener> listener() {
    absl::MutexLock lock(&mu_);
    return listener_;
  }
  // Moves the queued chunk into `wire` (whose spent contents become the next spare buffer).
  void TakeChunk(std::string* wire) {
    absl::MutexLock lock(&mu_);
    wire->clear();
    spare_.swap(*wire);
    wire->swap(outbox_);
  }

 private:
  template <typename F>
  void Post(F f);

  const std::shared_ptr<Core> core_;  // first: the strand below needs its io_context
  const Strand strand_;
  const std::weak_ptr<SessionBase> session_;
  absl::Mutex mu_;
  std::shared_ptr<Listener> listener_ ABSL_GUARDED_BY(mu_);
  bool responded_ ABSL_GUARDED_BY(mu_) = false;  // Reply or StartStream was called
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool complete_ ABSL_GUARDED_BY(mu_) = false;
  std::string outbox_ ABSL_GUARDED_BY(mu_);  // the chunk of the outstanding Send
  std::string spare_ ABSL_GUARDED_BY(mu_);   // handed back to the next Send
};

// The strand-side half of a connection, independent of the stream type.
class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() = default;
  virtual void DoReply(http::response<http::string_body> response) = 0;
  virtual void DoStartStream(int status, std::string content_type) = 0;
  virtual void DoSend() = 0;
  virtual void DoEndStream() = 0;
  virtual void Close() = 0;  // from any thread
};

template <typename F>
void Exchange::Post(F f) {
  net::post(strand_, [weak = session_, f = std::move(f)]() mutable {
    if (std::shared_ptr<SessionBase> s = weak.lock()) f(*s);
  });
}

http::response<http::string_body> MakeResponse(int status, std::string_view content_type,
                                               std::string body, std::string_view extra_headers) {
  http::response<http::string_body> r{static_cast<http::status>(status), 11};
  r.set(http::field::server, "pagellm");
  r.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
  // "Name: value\r\n" lines.
  std::string_view rest = extra_headers;
  while (!rest.empty()) {
    const size_t eol = rest.find("\r\n");
    std::string_view line = rest.substr(0, eol);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      r.set(beast::string_view(line.data(), colon), beast::string_view(value.data(), value.size()));
    }
    if (eol == std::string_view::npos) break;
    rest.remove_prefix(eol + 2);
  }
  r.body() = std::move(body);
  r.prepare_payload();
  return r;
}

void Exchange::Reply(int status, std::string_view content_type, std::string body,
                     std::string_view extra_headers) {
  {
    absl::MutexLock lock(&mu_);
    if (responded_) return;
    responded_ = true;
  }
  Post([r = MakeResponse(status, content_type, std::move(body), extra_headers)](
           SessionBase& s) mutable { s.DoReply(std::move(r)); });
}

void Exchange::StartStream(int status, std::string_view content_type) {
  {
    absl::MutexLock lock(&mu_);
    if (responded_) return;
    responded_ = true;
  }
  Post([status, ct = std::string(content_type)](SessionBase& s) mutable {
    s.DoStartStream(status, std::move(ct));
  });
}

void Exchange::Send(std::string* data) {
  {
    absl::MutexLock lock(&mu_);
    outbox_.swap(*data);
    data->swap(spare_);
    data->clear();
  }
  Post([](SessionBase& s) { s.DoSend(); });
}

void Exchange::EndStream() {
  Post([](SessionBase& s) { s.DoEndStream(); });
}

struct Registry {
  absl::Mutex mu;
  absl::flat_hash_map<SessionBase*, std::weak_ptr<SessionBase>> sessions ABSL_GUARDED_BY(mu);
  bool stopped ABSL_GUARDED_BY(mu) = false;
};

// One connection. Stream is beast::tcp_stream or beast::ssl_stream<beast::tcp_stream>.
template <typename Stream>
class Session final : public SessionBase {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Session(std::shared_ptr<Core> core, Registry* registry, HttpHandler* handler, tcp::socket socket,
          Strand strand)
      : core_(std::move(core)),
        registry_(registry),
        handler_(handler),
        strand_(std::move(strand)),
        stream_(MakeStream(std::move(socket))),
        idle_timer_(strand_) {
    beast::error_code ec;
    const tcp::endpoint ep = beast::get_lowest_layer(stream_).socket().remote_endpoint(ec);
    if (!ec) peer_ = absl::StrCat(ep.address().to_string(), ":", ep.port());
  }

  void Start() {
    net::dispatch(strand_, [self = Self()] {
      if constexpr (kTls) {
        beast::get_lowest_layer(self->stream_).expires_after(ToChrono(self->o().read_timeout));
        self->stream_.async_handshake(ssl::stream_base::server, [self](beast::error_code ec) {
          if (ec) return self->DoClose();
          self->ReadHeader();
        });
      } else {
        self->ReadHeader();
      }
    });
  }

  void Close() override {
    net::dispatch(strand_, [self = Self()] { self->DoClose(); });
  }

  void DoReply(http::response<http::string_body> response) override {
    if (closed_ || exchange_ == nullptr) return;
    access_.status = response.result_int();
    access_.body_bytes = response.body().size();
    response.keep_alive(keep_alive_);
    reply_.emplace(std::move(response));
    beast::get_lowest_layer(stream_).expires_after(ToChrono(o().write_timeout));
    writing_ = true;
    http::async_write(stream_, *reply_, [self = Self()](beast::error_code ec, size_t) {
      self->writing_ = false;
      self->reply_.reset();
      if (ec) {
        self->EndAccess(/*completed=*/false);
        return self->DoClose();
      }
      self->ResponseComplete();
    });
  }

  void DoStartStream(int status, std::string content_type) override {
    if (closed_ || exchange_ == nullptr) return;
    access_.status = status;
    stream_header_.emplace(static_cast<http::status>(status), 11);
    stream_header_->set(http::field::server, "pagellm");
    stream_header_->set(http::field::content_type, content_type);
    stream_header_->set(http::field::cache_control, "no-cache");
    stream_header_->keep_alive(keep_alive_);
    stream_header_->chunked(true);
    serializer_.emplace(*stream_header_);
    StartWrite([this](auto done) { http::async_write_header(stream_, *serializer_, done); },
               /*notify=*/false);
  }

  void DoSend() override {
    if (closed_ || exchange_ == nullptr) return;
    exchange_->TakeChunk(&wire_);
    if (wire_.empty()) return NotifySent(true);  // an empty chunk would end the stream
    access_.body_bytes += wire_.size();
    chunk_pending_ = true;
    PumpWrites();
  }

  void DoEndStream() override {
    if (closed_ || exchange_ == nullptr) return;
    end_requested_ = true;
    PumpWrites();
  }

 private:
  std::shared_ptr<Session> Self() { return std::static_pointer_cast<Session>(shared_from_this()); }
  const HttpServer::Options& o() const { return core_->options; }

  Stream MakeStream(tcp::socket socket) {
    if constexpr (kTls) {
      return Stream(beast::tcp_stream(std::move(socket)), *core_->tls);
    } else {
      return Stream(std::move(socket));
    }
  }

  // --- reading a request ---

  void ReadHeader() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(o().max_header_bytes));
    parser_->body_limit(o().max_body_bytes);
    beast::get_lowest_layer(stream_).expires_after(ToChrono(o().read_timeout));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = Self()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return ReadFailed(ec);
    const auto& req = parser_->get();
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      beast::get_lowest_layer(stream_).expires_after(ToChrono(o().write_timeout));
      net::async_write(stream_, net::buffer(kContinue),
                       [self = Self()](beast::error_code ec2, size_t) {
                         if (ec2) return self->DoClose();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    beast::get_lowest_layer(stream_).expires_after(ToChrono(o().read_timeout));
    http::async_read(stream_, buffer_, *parser_,
                     [self = Self()](beast::error_code ec, size_t) { self->OnRequest(ec); });
  }

  void ReadFailed(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      // The client may go on sending all the body it declared before it reads the answer.
      if (parser_ && parser_->content_length()) declared_body_ = *parser_->content_length();
      return ServerError(413, absl::StrCat("the request body is larger than the limit of ",
                                           o().max_body_bytes, " bytes"));
    }
    if (ec == http::error::header_limit) {
      return ServerError(431, absl::StrCat("the request header is larger than the limit of ",
                                           o().max_header_bytes, " bytes"));
    }
    if (ec == beast::error::timeout && buffer_.size() > 0) {
      return ServerError(408, "the request was not received in time");
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::operation_aborted || ec == beast::error::timeout ||
        ec == net::error::connection_reset || ec == ssl::error::stream_truncated) {
      return DoClose();
    }
    ServerError(400, absl::StrCat("malformed HTTP request: ", ec.message()));
  }

  // Answers an error the server found itself, then closes the connection.
  void ServerError(int status, std::string message) {
    keep_alive_ = false;
    linger_ = true;
    StartAccess("-", "");
    exchange_ = std::make_shared<Exchange>(core_, strand_, weak_from_this());
    std::string body =
        o().error_body ? o().error_body(status, message) : DefaultErrorBody(status, message);
    DoReply(MakeResponse(status, "application/json", std::move(body), {}));
  }

  void OnRequest(beast::error_code ec) {
    if (ec) return ReadFailed(ec);
    beast::get_lowest_layer(stream_).expires_never();
    http::request<http::string_body> req = parser_->release();
    parser_.reset();
    keep_alive_ = req.keep_alive();
    HttpRequest request;
    request.method = std::string(req.method_string());
    const beast::string_view target = req.target();
    request.path = std::string(target.substr(0, target.find('?')));
    request.authorization = std::string(req[http::field::authorization]);
    request.content_type = std::string(req[http::field::content_type]);
    request.body = std::move(req.body());
    request.peer = peer_;
    StartAccess(request.method, request.path);
    auto exchange = std::make_shared<Exchange>(core_, strand_, weak_from_this());
    exchange_ = exchange;
    Watch();
    handler_->Handle(std::move(request), std::move(exchange));
  }

  // --- the watch read: disconnects while answering, the next request after ---

  void Watch() {
    if (watching_ || closed_ || buffer_.size() >= o().max_header_bytes) return;
    watching_ = true;
    stream_.async_read_some(
        buffer_.prepare(kWatchReadBytes), [self = Self()](beast::error_code ec, size_t n) {
          self->watching_ = false;
          if (ec == net::error::operation_aborted && self->restart_after_watch_ && !self->closed_) {
            self->restart_after_watch_ = false;
            return self->ReadHeader();
          }
          if (ec) return self->ClientLeft();
          self->buffer_.commit(n);
          if (self->exchange_ != nullptr) return self->Watch();
          self->idle_timer_.cancel();
          self->ReadHeader();  // the next request has begun
        });
  }

  void ClientLeft() {
    if (exchange_ != nullptr) {
      if (auto listener = exchange_->Finish(/*closed=*/true)) listener->OnClosed();
      exchange_.reset();
    }
    DoClose();
  }

  // --- the access record of the exchange being answered ---

  void StartAccess(std::string_view method, std::string_view path) {
    if (!o().on_complete) return;
    access_ = {};
    access_method_.assign(method);
    access_path_.assign(path.substr(0, HttpAccess::kMaxPathBytes));
    access_start_ = absl::Now();
    access_open_ = true;
  }

  // Called when the exchange is over; while a write is in flight, its completion decides (the
  // client may have read the whole response and left before the completion ran).
  void EndAccess(bool completed) {
    if (!access_open_) return;
    access_open_ = false;
    access_.peer = peer_;
    access_.method = access_method_;
    access_.path = access_path_;
    access_.duration = absl::Now() - access_start_;
    access_.completed = completed;
    o().on_complete(access_);
  }

  // --- writing a streamed response ---

  // Starts `op(done)` as the one write in flight; `notify`: the listener hears OnSent after it.
  template <typename Op>
  void StartWrite(Op op, bool notify) {
    writing_ = true;
    beast::get_lowest_layer(stream_).expires_after(ToChrono(o().write_timeout));
    op([self = Self(), notify](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (ec) {
        self->EndAccess(/*completed=*/false);
        return self->ClientLeft();
      }
      // Closed while this write was completing: it was the last if the stream was ending.
      if (self->closed_) return self->EndAccess(/*completed=*/self->ending_);
      if (notify) self->NotifySent(true);
      self->PumpWrites();
    });
  }

  void PumpWrites() {
    if (writing_ || closed_ || exchange_ == nullptr) return;
    if (chunk_pending_) {
      chunk_pending_ = false;
      StartWrite(
          [this](auto done) {
            net::async_write(stream_, http::make_chunk(net::buffer(wire_)), std::move(done));
          },
          /*notify=*/true);
      return;
    }
    if (end_requested_) {
      end_requested_ = false;
      StartWrite(
          [this](auto done) {
            net::async_write(stream_, http::make_chunk_last(), std::move(done));
          },
          /*notify=*/false);
      ending_ = true;
      return;
    }
    if (ending_) {
      ending_ = false;
      serializer_.reset();
      stream_header_.reset();
      ResponseComplete();
    }
  }

  void NotifySent(bool ok) {
    if (exchange_ == nullptr) return;
    if (auto listener = exchange_->listener()) listener->OnSent(ok);
  }

  // --- after a response ---

  void ResponseComplete() {
    if (exchange_ != nullptr) {
      exchange_->Finish(/*closed=*/false);
      exchange_.reset();
    }
    EndAccess(/*completed=*/true);
    // Closed while the last write was completing (Stop, or the client left): arm nothing, or
    // the idle timer would hold Stop's I/O threads for idle_timeout.
    if (closed_) return;
    if (linger_) return LingerClose();
    if (!keep_alive_) return DoClose();
    if (!watching_) return ReadHeader();  // the buffer already holds the next request
    if (buffer_.size() > 0) {
      // A pipelined request is already here: stop waiting for more and parse it.
      restart_after_watch_ = true;
      beast::error_code ec;
      beast::get_lowest_layer(stream_).socket().cancel(ec);
      return;
    }
    idle_timer_.expires_after(ToChrono(o().idle_timeout));
    idle_timer_.async_wait([self = Self()](beast::error_code ec) {
      if (!ec && self->exchange_ == nullptr && !self->parser_) self->DoClose();
    });
  }

  // After an error the server answered while the client may still be sending (a body over the
  // limit): stop sending, then read and drop what comes for a short while (2 s at most, and no
  // more than the declared body, up to kMaxLingerBytes, or the limits), so that the client reads
  // the answer instead of a reset. Clients such as Python's urllib send the whole body before
  // they read. Plain TCP also half-closes first (the client reads the end of the answer); TLS
  // cannot half-close under the session, and need not: the answer has its Content-Length.
  void LingerClose() {
    linger_ = false;
    if constexpr (!kTls) {
      beast::error_code ec;
      beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_send, ec);
      if (ec) return DoClose();
    }
    if (watching_) return DoClose();
    beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(2));
    const uint64_t body =
        std::max<uint64_t>(o().max_body_bytes, std::min<uint64_t>(declared_body_, kMaxLingerBytes));
    Drain(body + o().max_header_bytes);
  }

  void Drain(size_t budget) {
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(kDrainReadBytes),
                            [self = Self(), budget](beast::error_code ec, size_t n) {
                              if (ec || n >= budget) return self->DoClose();
                              self->Drain(budget - n);
                            });
  }

  void DoClose() {
    if (closed_) return;
    closed_ = true;
    if (exchange_ != nullptr) {
      if (auto listener = exchange_->Finish(/*closed=*/true)) listener->OnClosed();
      exchange_.reset();
    }
    if (!writing_) EndAccess(/*completed=*/false);  // else the write's completion ends it
    idle_timer_.cancel();
    beast::get_lowest_layer(stream_).close();
    absl::MutexLock lock(&registry_->mu);
    registry_->sessions.erase(this);
  }

  const std::shared_ptr<Core> core_;
  Registry* const registry_;  // outlives the I/O threads, hence every session operation
  HttpHandler* const handler_;
  Strand strand_;
  Stream stream_;
  net::steady_timer idle_timer_;
  std::string peer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;  // while reading a request
  std::shared_ptr<Exchange> exchange_;  // the request being answered; null between requests
  bool keep_alive_ = false;
  bool watching_ = false;
  bool writing_ = false;
  bool closed_ = false;
  std::optional<http::response<http::string_body>> reply_;
  std::optional<http::response<http::empty_body>> stream_header_;
  std::optional<http::response_serializer<http::empty_body>> serializer_;
  std::string wire_;            // the chunk being written
  bool chunk_pending_ = false;  // wire_ holds a chunk to write (after the header write)
  bool end_requested_ = false;
  bool linger_ = false;  // close with LingerClose after the response
  // With Options::on_complete: the exchange being answered, from StartAccess to EndAccess.
  HttpAccess access_;
  std::string access_method_;
  std::string access_path_;
  absl::Time access_start_;
  bool access_open_ = false;
  uint64_t declared_body_ = 0;        // Content-Length of a body over the limit
  bool restart_after_watch_ = false;  // the watch read was cancelled to parse buffered bytes
  bool ending_ = false;               // the last chunk is being written
};

class HttpServerImpl final : public HttpServer {
 public:
  HttpServerImpl(std::shared_ptr<Core> core, HttpHandler* handler)
      : core_(std::move(core)),
        handler_(handler),
        acceptor_(net::make_strand(core_->ioc)),
        work_(net::make_work_guard(core_->ioc)) {}

  ~HttpServerImpl() override { Stop(); }

  absl::Status Listen() {
    const Options& o = core_->options;
    beast::error_code ec;
    const net::ip::address address = net::ip::make_address(o.host, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("bad --host '", o.host, "'"));
    const tcp::endpoint endpoint(address, static_cast<uint16_t>(o.port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", o.host, ":", o.port, ": ", ec.message()));
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    for (int i = 0; i < o.threads; ++i) threads_.emplace_back([this] { core_->ioc.run(); });
    return absl::OkStatus();
  }

  int port() const override { return port_; }
  size_t connections() const override {
    absl::MutexLock lock(&registry_.mu);
    return registry_.sessions.size();
  }

  void Stop() override {
    {
      absl::MutexLock lock(&registry_.mu);
      if (registry_.stopped) return;
      registry_.stopped = true;
    }
    net::post(acceptor_.get_executor(), [this] {
      beast::error_code ec;
      acceptor_.close(ec);
    });
    std::vector<std::shared_ptr<SessionBase>> open;
    {
      absl::MutexLock lock(&registry_.mu);
      for (auto& [ptr, weak] : registry_.sessions) {
        if (auto s = weak.lock()) open.push_back(std::move(s));
      }
    }
    for (auto& s : open) s->Close();
    open.clear();
    work_.reset();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Accept() {
    Strand strand = net::make_strand(core_->ioc);
    acceptor_.async_accept(strand, [this, strand](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) OnAccept(std::move(socket), strand);
      Accept();
    });
  }

  void OnAccept(tcp::socket socket, Strand strand) {
    beast::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    std::shared_ptr<SessionBase> session;
    if (core_->tls.has_value()) {
      session = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
          core_, &registry_, handler_, std::move(socket), strand);
    } else {
      session = std::make_shared<Session<beast::tcp_stream>>(core_, &registry_, handler_,
                                                             std::move(socket), strand);
    }
    {
      absl::MutexLock lock(&registry_.mu);
      if (registry_.stopped || registry_.sessions.size() >= core_->options.max_connections) {
        return;  // the socket closes with the session
      }
      registry_.sessions.emplace(session.get(), session);
    }
    if (core_->tls.has_value()) {
      static_cast<Session<beast::ssl_stream<beast::tcp_stream>>*>(session.get())->Start();
    } else {
      static_cast<Session<beast::tcp_stream>*>(session.get())->Start();
    }
  }

  const std::shared_ptr<Core> core_;
  HttpHandler* const handler_;
  mutable Registry registry_;
  tcp::acceptor acceptor_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
  int port_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Options options,
                                                              HttpHandler* handler) {
  if (handler == nullptr) return absl::InvalidArgumentError("no HTTP handler");
  if (options.threads < 1 || options.threads > 64) {
    return absl::InvalidArgumentError("--http-threads must be in [1, 64]");
  }
  if (options.max_connections == 0) {
    return absl::InvalidArgumentError("--http-max-connections must be > 0");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  auto core = std::make_shared<Core>(options);
  if (!options.tls_cert_file.empty()) {
    core->tls.emplace(ssl::context::tls_server);
    core->tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    beast::error_code ec;
    core->tls->use_certificate_chain_file(options.tls_cert_file, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat("cannot use the TLS certificate ",
                                                     options.tls_cert_file, ": ", ec.message()));
    }
    core->tls->use_private_key_file(options.tls_key_file, ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot use the TLS key ", options.tls_key_file, ": ", ec.message()));
    }
  }
  auto server = std::make_unique<HttpServerImpl>(std::move(core), handler);
  if (absl::Status s = server->Listen(); !s.ok()) return s;
  return server;
}

}  // namespace pagellm
