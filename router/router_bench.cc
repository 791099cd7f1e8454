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
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
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
              bool record_latency) {
  Totals totals;
  const absl::Time start = absl::Now();
  std::vector<std::unique_ptr<Streamer<Stub, Request>>> all;
  for (int i = 0; i < streams; ++i) {
    all.push_back(std::make_unique<Streamer<Stub, Request>>(stub, request, start + duration,
                                                            &totals, record_latency));
    all.back()->Start();
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
    std::vector<std::string> args = {binary,
                                     absl::StrCat("--workers=", worker),
                                     "--host=127.0.0.1",
                                     absl::StrCat("--port=", port_),
                                     "--metrics-port=0",
                                     "--http-port=0",
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
    auto wstub = v1::Worker::NewStub(connect(worker->address()));
    RunResult d = Run(wstub.get(), direct, absl::GetFlag(FLAGS_streams), duration, false);
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
    auto wstub = v1::Worker::NewStub(connect(worker->address()));
    const int n = absl::GetFlag(FLAGS_latency_streams);
    Run(stub.get(), request, n, absl::Milliseconds(500), false);  // warm-up
    RunResult base = Run(wstub.get(), direct, n, duration, true);
    RunResult via = Run(stub.get(), request, n, duration, true);
    std::printf(
        "latency: %d streams, a token every %d us each (%.0f tokens/s): per-token delivery "
        "p50 %.0f us / p99 %.0f us direct, p50 %.0f us / p99 %.0f us through the router: "
        "added p50 %.0f us, p99 %.0f us (%lld errors)\n",
        n, absl::GetFlag(FLAGS_latency_interval_us), via.tokens_per_s, base.p50_us, base.p99_us,
        via.p50_us, via.p99_us, via.p50_us - base.p50_us, via.p99_us - base.p99_us,
        static_cast<long long>(base.errors + via.errors));
  }
  return 0;
}

}  // namespace
}  // namespace pagellm

int main(int argc, char** argv) {
  pagellm::cli::ParseFlags(argc, argv);
  return pagellm::Main();
}
