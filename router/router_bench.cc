// router_bench: what pagellm-router costs per streamed token.
//
// Runs a fake worker in this process and pagellm-router as a child process (optionally pinned
// to one CPU), then streams through the router with many concurrent Generate calls:
//   throughput phase: the worker sends tokens as fast as the streams take them; reports
//     streamed tokens/s and tokens per second of router CPU time (the router's cost, whatever
//     else shares the machine);
//   latency phase: the worker paces tokens (--latency-interval-us per stream); each token
//     carries its send time, so the client measures per-token delivery latency, directly from
//     the worker (baseline) and through the router. Added latency = router - baseline.
//
//   HTTP phase: --http-streams concurrent streaming /v1/completions requests on the router's
//     OpenAI-compatible port (one connection each, tokens paced --http-interval-ms apart), the
//     same per-token latency against the same streams straight to the worker, and the router's
//     thread count while they run.
//
//   build-router/bin/router_bench [--router-binary PATH] [--router-cpu 0] [--seconds 5]
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/flags_util.h"
#include "common/testing/grpc_probe.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/generation.grpc.pb.h"
#include "pagellm/v1/worker.grpc.pb.h"
#include "router/testing/fake_worker.h"

ABSL_FLAG(std::string, router_binary, "", "pagellm-router to run (default: next to this tool)");
ABSL_FLAG(int, router_cpu, -1, "Pin the router to this CPU (-1: no pinning)");
ABSL_FLAG(double, seconds, 5.0, "Duration of each measurement");
ABSL_FLAG(int, streams, 64, "Concurrent streams in the throughput phase");
ABSL_FLAG(int, tokens, 256, "Tokens per request");
ABSL_FLAG(int, latency_streams, 16, "Concurrent streams in the latency phase");
ABSL_FLAG(int, latency_interval_us, 2000, "Time between a stream's tokens in the latency phase");
ABSL_FLAG(int, http_streams, 1000,
          "Concurrent streaming HTTP requests in the HTTP phase (0: skip)");
ABSL_FLAG(int, http_tokens, 100, "Tokens per HTTP request");
ABSL_FLAG(int, http_interval_ms, 50, "Time between a stream's tokens in the HTTP phase");

namespace pagellm {
namespace {

using testing::FakeWorker;

int64_t NowNs() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

struct Totals {
  std::atomic<int64_t> tokens{0};
  std::atomic<int64_t> errors{0};
  absl::Mutex mu;
  std::vector<int64_t> latencies_ns;  // guarded by mu
};

// One stream slot: runs requests back to back until `until`, counting tokens and, when the
// text carries a send time, the delivery latency of each token.
template <typename Stub, typename Request>
class Streamer final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  Streamer(Stub* stub, Request request, absl::Time until, Totals* totals, bool record_latency)
      : stub_(stub),
        request_(std::move(request)),
        until_(until),
        totals_(totals),
        record_(record_latency) {}

  void Start() {
    context_ = std::make_unique<grpc::ClientContext>();
    stub_->async()->Generate(context_.get(), &request_, this);
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const int64_t now = NowNs();
    for (const auto& d : response_.deltas()) {
      tokens_ += d.token_ids_size();
      if (record_ && !d.text().empty()) local_.push_back(now - std::stoll(d.text()));
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& s) override {
    if (!s.ok()) totals_->errors.fetch_add(1);
    if (absl::Now() < until_) {
      Start();
      return;
    }
    totals_->tokens.fetch_add(tokens_);
    {
      absl::MutexLock lock(&totals_->mu);
      totals_->latencies_ns.insert(totals_->latencies_ns.end(), local_.begin(), local_.end());
    }
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

  void Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

 private:
  Stub* stub_;
  Request request_;
  const absl::Time until_;
  Totals* totals_;
  const bool record_;
  std::unique_ptr<grpc::ClientContext> context_;
  v1::GenerateResponse response_;
  int64_t tokens_ = 0;
  std::vector<int64_t> local_;
  absl::Mutex mu_;
  bool done_ = false;
};

struct RunResult {
  double tokens_per_s = 0;
  int64_t tokens = 0;
  int64_t errors = 0;
  double p50_us = 0, p99_us = 0;
};

template <typename Stub, typename Request>
RunResult Run(Stub* stub, const Request& request, int streams, absl::Duration duration,
              bool record_latency, absl::Duration stagger = absl::ZeroDuration()) {
  Totals totals;
  const absl::Time start = absl::Now();
  std::vector<std::unique_ptr<Streamer<Stub, Request>>> all;
  for (int i = 0; i < streams; ++i) {
    all.push_back(std::make_unique<Streamer<Stub, Request>>(stub, request, start + duration,
                                                            &totals, record_latency));
    all.back()->Start();
    if (stagger > absl::ZeroDuration()) absl::SleepFor(stagger / streams);
  }
  for (auto& s : all) s->Wait();
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  RunResult r;
  r.tokens = totals.tokens.load();
  r.errors = totals.errors.load();
  r.tokens_per_s = r.tokens / secs;
  auto& l = totals.latencies_ns;
  if (!l.empty()) {
    std::sort(l.begin(), l.end());
    r.p50_us = l[l.size() / 2] / 1e3;
    r.p99_us = l[std::min(l.size() - 1, l.size() * 99 / 100)] / 1e3;
  }
  return r;
}

// One streaming /v1/completions request over its own connection; records each token's delivery
// latency from the send time the fake worker puts in its text. Runs on the caller's io_context.
class HttpStreamer : public std::enable_shared_from_this<HttpStreamer> {
 public:
  HttpStreamer(boost::asio::io_context& ioc, int port, std::string body, Totals* totals,
               std::atomic<int>* completed)
      : socket_(ioc), port_(port), totals_(totals), completed_(completed) {
    request_ = {boost::beast::http::verb::post, "/v1/completions", 11};
    request_.set(boost::beast::http::field::host, "127.0.0.1");
    request_.set(boost::beast::http::field::content_type, "application/json");
    request_.body() = std::move(body);
    request_.prepare_payload();
    parser_.body_limit(64 << 20);
    on_chunk_ = [this](uint64_t, boost::beast::string_view data, boost::beast::error_code&) {
      OnChunk(std::string_view(data.data(), data.size()));
      return data.size();
    };
    parser_.on_chunk_body(on_chunk_);
  }

  void Start() {
    auto self = shared_from_this();
    socket_.async_connect({boost::asio::ip::address_v4::loopback(), static_cast<uint16_t>(port_)},
                          [self](boost::beast::error_code ec) {
                            if (ec) return self->Fail();
                            boost::beast::http::async_write(
                                self->socket_, self->request_,
                                [self](boost::beast::error_code ec2, size_t) {
                                  if (ec2) return self->Fail();
                                  self->Read();
                                });
                          });
  }

 private:
  void Read() {
    auto self = shared_from_this();
    boost::beast::http::async_read(
        socket_, buffer_, parser_, [self](boost::beast::error_code ec, size_t) {
          if (ec || self->parser_.get().result_int() != 200 || !self->done_) {
            return self->Fail();
          }
          self->totals_->tokens.fetch_add(self->tokens_);
          {
            absl::MutexLock lock(&self->totals_->mu);
            self->totals_->latencies_ns.insert(self->totals_->latencies_ns.end(),
                                               self->local_.begin(), self->local_.end());
          }
          self->completed_->fetch_add(1);
        });
  }

  // Chunk data may arrive in pieces: events are handled once whole ("data: ...\n\n").
  void OnChunk(std::string_view piece) {
    const int64_t now = NowNs();
    pending_.append(piece);
    size_t start = 0;
    for (size_t end; (end = pending_.find("\n\n", start)) != std::string::npos; start = end + 2) {
      const std::string_view event(pending_.data() + start, end - start);
      if (event == "data: [DONE]") {
        done_ = true;
        continue;
      }
      const size_t at = event.find("\"text\":\"");
      if (at == std::string_view::npos) continue;
      const size_t begin = at + 8;
      const size_t stop = event.find('"', begin);
      int64_t sent = 0;
      if (stop == std::string_view::npos ||
          !absl::SimpleAtoi(absl::string_view(event.data() + begin, stop - begin), &sent)) {
        continue;
      }
      ++tokens_;
      local_.push_back(now - sent);
    }
    pending_.erase(0, start);
  }

  void Fail() { totals_->errors.fetch_add(1); }

  boost::asio::ip::tcp::socket socket_;
  const int port_;
  Totals* const totals_;
  std::atomic<int>* const completed_;
  boost::beast::http::request<boost::beast::http::string_body> request_;
  boost::beast::flat_buffer buffer_;
  boost::beast::http::response_parser<boost::beast::http::string_body> parser_;
  std::function<size_t(uint64_t, boost::beast::string_view, boost::beast::error_code&)> on_chunk_;
  std::string pending_;  // the start of an event not yet whole
  int64_t tokens_ = 0;
  bool done_ = false;
  std::vector<int64_t> local_;
};

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// The router as a child process.
class RouterProcess {
 public:
  RouterProcess(const std::string& binary, const std::string& worker, int cpu) {
    port_ = FreePort();
    http_port_ = FreePort();
    std::vector<std::string> args = {binary,
                                     absl::StrCat("--workers=", worker),
                                     "--host=127.0.0.1",
                                     absl::StrCat("--port=", port_),
                                     "--metrics-port=0",
                                     absl::StrCat("--http-port=", http_port_),
                                     "--http-max-connections=8192",
                                     "--max-queue=8192",
                                     "--log-level=warn"};
    pid_ = fork();
    if (pid_ == 0) {
      if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof(set), &set);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      std::perror("execv");
      _exit(127);
    }
  }
  ~RouterProcess() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  int port() const { return port_; }
  int http_port() const { return http_port_; }
  // user + system CPU seconds so far, and the thread count.
  double CpuSeconds() const {
    std::ifstream f(absl::StrCat("/proc/", pid_, "/stat"));
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t close_paren = s.rfind(')');
    std::vector<std::string> fields;
    std::string cur;
    for (size_t i = close_paren + 2; i < s.size(); ++i) {
      if (s[i] == ' ') {
        fields.push_back(cur);
        cur.clear();
      } else {
        cur.push_back(s[i]);
      }
    }
    // Fields after "pid (comm)": state is [0]; utime [11], stime [12].
    if (fields.size() < 13) return 0;
    return (std::stod(fields[11]) + std::stod(fields[12])) / sysconf(_SC_CLK_TCK);
  }
  int Threads() const {
    std::ifstream f(absl::StrCat("/proc/", pid_, "/status"));
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
    }
    return 0;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int http_port_ = 0;
};

std::string DefaultRouterBinary() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "pagellm-router")
      .string();
}

int Main() {
  const absl::Duration duration = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::string binary = absl::GetFlag(FLAGS_router_binary);
  if (binary.empty()) binary = DefaultRouterBinary();
  const int tokens = absl::GetFlag(FLAGS_tokens);

  v1::ModelInfo info = FakeWorker::DefaultInfo();
  info.set_max_model_len(1 << 20);
  auto make_worker = [&](absl::Duration interval) {
    FakeWorker::Options o;
    o.tokens_per_request = tokens;
    o.token_interval = interval;
    o.stamp_text = true;
    o.record_requests = false;
    o.info = info;
    o.load.set_kv_blocks_total(1 << 30);
    o.load.set_kv_blocks_free(1 << 30);
    return FakeWorker::Start(o);
  };

  v1::GenerateRequest request;
  request.set_text("hello");
  request.mutable_sampling()->set_max_tokens(tokens);
  v1::WorkerGenerateRequest direct;
  direct.add_prompt_token_ids(1);
  direct.mutable_sampling()->set_max_tokens(tokens);

  auto connect = [](const std::string& address) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  };
  auto wait_serving = [](const std::shared_ptr<grpc::Channel>& ch) {
    for (int i = 0; i < 500; ++i) {
      auto h = testing::CheckHealth(ch, "");
      if (h.ok() && *h == testing::HealthStatus::kServing) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  };

  std::printf("router_bench: %s, %d tokens/request, %.1fs per phase, router CPU %s\n",
              binary.c_str(), tokens, absl::ToDoubleSeconds(duration),
              absl::GetFlag(FLAGS_router_cpu) >= 0
                  ? std::to_string(absl::GetFlag(FLAGS_router_cpu)).c_str()
                  : "unpinned");

  // ---- Throughput: as fast as possible. ----
  {
    auto worker = make_worker(absl::ZeroDuration());
    RouterProcess router(binary, worker->address(), absl::GetFlag(FLAGS_router_cpu));
    auto channel = connect(absl::StrCat("127.0.0.1:", router.port()));
    if (!wait_serving(channel)) {
      std::fprintf(stderr, "the router did not become ready\n");
      return 1;
    }
    auto stub = v1::Generation::NewStub(channel);
    Run(stub.get(), request, 8, absl::Milliseconds(500), false);  // warm-up
    const double cpu0 = router.CpuSeconds();
    RunResult r = Run(stub.get(), request, absl::GetFlag(FLAGS_streams), duration, false);
    const double cpu = router.CpuSeconds() - cpu0;
    std::printf(
        "throughput: %d streams: %.0f tokens/s through the router (%lld tokens, %lld errors); "
        "router CPU %.2f s = %.0f tokens per router CPU-second; router threads %d\n",
        absl::GetFlag(FLAGS_streams), r.tokens_per_s, static_cast<long long>(r.tokens),
        static_cast<long long>(r.errors), cpu, cpu > 0 ? r.tokens / cpu : 0.0, router.Threads());
    auto worker_stub = v1::Worker::NewStub(connect(worker->address()));
    RunResult d = Run(worker_stub.get(), direct, absl::GetFlag(FLAGS_streams), duration, false);
    std::printf("throughput: same streams straight to the worker: %.0f tokens/s\n", d.tokens_per_s);
  }

  // ---- Latency: paced tokens. ----
  {
    auto worker = make_worker(absl::Microseconds(absl::GetFlag(FLAGS_latency_interval_us)));
    RouterProcess router(binary, worker->address(), absl::GetFlag(FLAGS_router_cpu));
    auto channel = connect(absl::StrCat("127.0.0.1:", router.port()));
    if (!wait_serving(channel)) {
      std::fprintf(stderr, "the router did not become ready\n");
      return 1;
    }
    auto stub = v1::Generation::NewStub(channel);
    auto worker_stub = v1::Worker::NewStub(connect(worker->address()));
    const int n = absl::GetFlag(FLAGS_latency_streams);
    Run(stub.get(), request, n, absl::Milliseconds(500), false);  // warm-up
    RunResult base = Run(worker_stub.get(), direct, n, duration, true);
    RunResult via = Run(stub.get(), request, n, duration, true);
    std::printf(
        "latency: %d streams, a token every %d us each (%.0f tokens/s): per-token delivery "
        "p50 %.0f us / p99 %.0f us direct, p50 %.0f us / p99 %.0f us through the router: "
        "added p50 %.0f us, p99 %.0f us (%lld errors)\n",
        n, absl::GetFlag(FLAGS_latency_interval_us), via.tokens_per_s, base.p50_us, base.p99_us,
        via.p50_us, via.p99_us, via.p50_us - base.p50_us, via.p99_us - base.p99_us,
        static_cast<long long>(base.errors + via.errors));
  }

  // ---- HTTP: many concurrent streaming requests on the OpenAI-compatible API. ----
  if (const int n = absl::GetFlag(FLAGS_http_streams); n > 0) {
    const int http_tokens = absl::GetFlag(FLAGS_http_tokens);
    FakeWorker::Options o;
    o.tokens_per_request = http_tokens;
    o.token_interval = absl::Milliseconds(absl::GetFlag(FLAGS_http_interval_ms));
    o.stamp_text = true;
    o.record_requests = false;
    o.info = info;
    o.load.set_kv_blocks_total(1 << 30);
    o.load.set_kv_blocks_free(1 << 30);
    auto worker = FakeWorker::Start(o);
    RouterProcess router(binary, worker->address(), absl::GetFlag(FLAGS_router_cpu));
    auto channel = connect(absl::StrCat("127.0.0.1:", router.port()));
    if (!wait_serving(channel)) {
      std::fprintf(stderr, "the router did not become ready\n");
      return 1;
    }
    // Baseline: the same streams straight to the worker, one request each.
    auto worker_stub = v1::Worker::NewStub(connect(worker->address()));
    v1::WorkerGenerateRequest paced = direct;
    paced.mutable_sampling()->set_max_tokens(http_tokens);
    // Streams start spread over one token interval, as independent clients do (started together,
    // every stream's tokens would arrive in the same millisecond).
    const absl::Duration interval = absl::Milliseconds(absl::GetFlag(FLAGS_http_interval_ms));
    RunResult base = Run(worker_stub.get(), paced, n, absl::ZeroDuration(), true, interval);

    Totals totals;
    std::atomic<int> completed{0};
    boost::asio::io_context ioc;
    const std::string body =
        absl::StrCat(R"({"prompt": "hello", "stream": true, "max_tokens": )", http_tokens, "}");
    auto guard = boost::asio::make_work_guard(ioc);
    int max_threads = 0;
    std::atomic<bool> running{true};
    std::thread sampler([&] {
      while (running.load()) {
        max_threads = std::max(max_threads, router.Threads());
        absl::SleepFor(absl::Milliseconds(50));
      }
    });
    const absl::Time start = absl::Now();
    const double cpu0 = router.CpuSeconds();
    std::thread client([&ioc] { ioc.run(); });
    for (int i = 0; i < n; ++i) {
      auto streamer =
          std::make_shared<HttpStreamer>(ioc, router.http_port(), body, &totals, &completed);
      boost::asio::post(ioc, [streamer] { streamer->Start(); });
      absl::SleepFor(interval / n);
    }
    guard.reset();
    client.join();
    const double secs = absl::ToDoubleSeconds(absl::Now() - start);
    const double cpu = router.CpuSeconds() - cpu0;
    running.store(false);
    sampler.join();
    auto& l = totals.latencies_ns;
    std::sort(l.begin(), l.end());
    const double p50 = l.empty() ? 0 : l[l.size() / 2] / 1e3;
    const double p99 = l.empty() ? 0 : l[std::min(l.size() - 1, l.size() * 99 / 100)] / 1e3;
    std::printf(
        "http: %d concurrent streaming /v1/completions of %d tokens, a token every %d ms each: "
        "%d of %d completed (%lld errors) in %.1f s, %.0f tokens/s, router CPU %.2f s (%.1f us "
        "per token); router threads at most %d; "
        "per-token delivery p50 %.0f us / p99 %.0f us (direct to the worker p50 %.0f us / p99 "
        "%.0f us): added p50 %.0f us, p99 %.0f us\n",
        n, http_tokens, absl::GetFlag(FLAGS_http_interval_ms), completed.load(), n,
        static_cast<long long>(totals.errors.load()), secs, totals.tokens.load() / secs, cpu,
        totals.tokens.load() > 0 ? cpu * 1e6 / totals.tokens.load() : 0.0, max_threads, p50, p99,
        base.p50_us, base.p99_us, p50 - base.p50_us, p99 - base.p99_us);
  }
  return 0;
}

}  // namespace
}  // namespace pagellm

int main(int argc, char** argv) {
  pagellm::cli::ParseFlags(argc, argv);
  return pagellm::Main();
}
