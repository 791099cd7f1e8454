// WorkerServer in-process, without a model: the scripted backend (or the mock one for timing)
// behind a real gRPC server on a loopback port, called through the generated stub and the
// health service. Covers streaming, model info, bad input, health and the drain protocol.
#include "worker/server/worker_server.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/auth/secret_set.h"
#include "common/testing/grpc_probe.h"
#include "gtest/gtest.h"
#include "pagellm/v1/worker.grpc.pb.h"
#include "worker/backend/mock/mock_backend.h"
#include "worker/backend/testing/scripted_backend.h"

namespace pagellm {
namespace {

using testing::ScriptedBackend;

class WorkerServerTest : public ::testing::Test {
 protected:
  // Starts a server over `backend` (the scripted one when null). The metrics exposer takes 2 s to
  // stop, so only the test that reads /metrics has one.
  void Start(std::unique_ptr<Backend> backend = nullptr, bool metrics = false,
             const std::string& worker_token = "", RuntimeLoraOptions lora = {}) {
    auto tokenizer = MockTokenizer();
    ASSERT_TRUE(tokenizer.ok());
    if (backend == nullptr) {
      auto scripted =
          std::make_unique<ScriptedBackend>(testing::ScriptedBackendOptions{.vocab_size = 257});
      scripted_ = scripted.get();
      backend = std::move(scripted);
    }
    WorkerServer::Options o;
    o.listen_address = "127.0.0.1:0";
    if (metrics) o.metrics_address = "127.0.0.1:0";
    o.model_name = "scripted";
    o.chat_template = "{{ messages }}";
    o.worker_token = worker_token;
    o.lora = std::move(lora);
    auto server = WorkerServer::Start(std::move(o), std::move(backend), *std::move(tokenizer));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Worker::NewStub(channel_);
  }

  static v1::WorkerGenerateRequest Request(const std::vector<int32_t>& prompt, int max_tokens) {
    v1::WorkerGenerateRequest r;
    r.set_request_id("client-id");
    for (int32_t id : prompt) r.add_prompt_token_ids(id);
    r.mutable_sampling()->set_temperature(0.0f);
    r.mutable_sampling()->set_max_tokens(max_tokens);
    r.mutable_sampling()->set_ignore_eos(true);
    return r;
  }

  // Streams one request to its end: (status, tokens).
  std::pair<grpc::Status, std::vector<int32_t>> Generate(const v1::WorkerGenerateRequest& r,
                                                         grpc::ClientContext* ctx) {
    auto reader = stub_->Generate(ctx, r);
    v1::GenerateResponse resp;
    std::vector<int32_t> tokens;
    while (reader->Read(&resp)) {
      for (const auto& d : resp.deltas()) {
        tokens.insert(tokens.end(), d.token_ids().begin(), d.token_ids().end());
      }
    }
    return {reader->Finish(), tokens};
  }

  testing::HealthStatus Health() {
    absl::StatusOr<testing::HealthStatus> h = testing::CheckHealth(channel_, "");
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? *h : testing::HealthStatus::kUnknown;
  }

  ScriptedBackend* scripted_ = nullptr;  // owned by the server
  std::unique_ptr<WorkerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Worker::Stub> stub_;
};

TEST_F(WorkerServerTest, ServesTheModelItWasGiven) {
  Start(nullptr, /*metrics=*/true);
  EXPECT_TRUE(server_->serving());
  ASSERT_GT(server_->metrics_port(), 0);
  absl::StatusOr<std::string> metrics = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_NE(metrics->find("pagellm_kv_cache_blocks_capacity{pool=\"swap\"}"), std::string::npos);
  EXPECT_EQ(Health(), testing::HealthStatus::kServing);

  grpc::ClientContext info_ctx;
  v1::ModelInfo info;
  ASSERT_TRUE(stub_->GetModelInfo(&info_ctx, {}, &info).ok());
  EXPECT_EQ(info.model_name(), "scripted");
  EXPECT_EQ(info.vocab_size(), 257);
  EXPECT_EQ(info.block_size(), 4);
  EXPECT_EQ(info.chat_template(), "{{ messages }}");

  const std::vector<int32_t> prompt = {72, 101, 108, 108, 111};
  grpc::ClientContext ctx;
  const auto [status, tokens] = Generate(Request(prompt, 7), &ctx);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens, scripted_->Continue(prompt, 7));
}

TEST_F(WorkerServerTest, WithAWorkerTokenOnlyCallsCarryingItAreServed) {
  Start(nullptr, /*metrics=*/false, /*worker_token=*/"router-secret");
  for (const char* token : {"", "router-secre", "router-secret2"}) {
    SCOPED_TRACE(token);
    grpc::ClientContext load_ctx, info_ctx, tok_ctx, gen_ctx;
    for (grpc::ClientContext* c : {&load_ctx, &info_ctx, &tok_ctx, &gen_ctx}) {
      if (*token != '\0') c->AddMetadata(kWorkerTokenHeader, token);
    }
    v1::WorkerLoad load;
    EXPECT_EQ(stub_->GetLoad(&load_ctx, {}, &load).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    v1::ModelInfo info;
    EXPECT_EQ(stub_->GetModelInfo(&info_ctx, {}, &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::TokenizerSpec spec;
    EXPECT_EQ(stub_->GetTokenizer(&tok_ctx, {}, &spec).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Generate(Request({72, 101}, 2), &gen_ctx).first.error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(Health(), testing::HealthStatus::kServing) << "health checks stay open";
  grpc::ClientContext ctx;
  ctx.AddMetadata(kWorkerTokenHeader, "router-secret");
  const auto [status, tokens] = Generate(Request({72, 101}, 2), &ctx);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens.size(), 2u);
}

TEST_F(WorkerServerTest, BadRequestsGetInvalidArgument) {
  Start();
  grpc::ClientContext ctx;
  EXPECT_EQ(Generate(Request({}, 4), &ctx).first.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  grpc::ClientContext ctx2;
  EXPECT_EQ(Generate(Request({1, 900}, 4), &ctx2).first.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(server_->serving());
}

// Issue 9: garbage, invalid UTF-8 and oversized values get INVALID_ARGUMENT naming the problem
// (gRPC's own deserialization answered with an empty UNIMPLEMENTED), and nothing reaches the
// engine.
TEST_F(WorkerServerTest, MalformedRequestsGetInvalidArgumentNamingTheProblem) {
  Start();
  const std::string method = "/pagellm.v1.Worker/Generate";
  std::string reply;
  grpc::Status s = testing::CallRaw(channel_, method, std::string("\xff\xff\xff", 3), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "the request is not a pagellm.v1.WorkerGenerateRequest");

  const std::string bad_id = std::string("\x0a\x02\xff\xfe", 4);  // request_id = ff fe
  s = testing::CallRaw(channel_, method, bad_id, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "request_id is not valid UTF-8");

  v1::WorkerGenerateRequest long_id = Request({1, 2}, 4);
  long_id.set_request_id(std::string(2 << 20, 'i'));  // echoed in every response
  grpc::ClientContext ctx;
  const auto [status, tokens] = Generate(long_id, &ctx);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "request_id is 2097152 bytes long; the limit is 320");
  EXPECT_TRUE(tokens.empty());
  EXPECT_EQ(scripted_->forward_calls(), 0);
}

TEST_F(WorkerServerTest, APortInUseIsAnErrorAtStartNotShared) {
  Start();
  auto tokenizer = MockTokenizer();
  ASSERT_TRUE(tokenizer.ok());
  WorkerServer::Options o;
  o.listen_address = absl::StrCat("127.0.0.1:", server_->port());
  o.model_name = "second";
  o.chat_template = "{{ messages }}";
  auto second = WorkerServer::Start(
      std::move(o),
      std::make_unique<ScriptedBackend>(testing::ScriptedBackendOptions{.vocab_size = 257}),
      *std::move(tokenizer));
  ASSERT_FALSE(second.ok()) << "a second worker started on a port in use";
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot listen on 127.0.0.1:"), std::string::npos)
      << second.status();
  EXPECT_EQ(Health(), testing::HealthStatus::kServing);
}

TEST_F(WorkerServerTest, ShutdownDrainsWithinTheGrace) {
  Start();
  // The running request's steps wait for `release`, so it is in flight while the drain begins.
  absl::Notification in_step, release;
  scripted_->SetStepHook([&] {
    if (!in_step.HasBeenNotified()) in_step.Notify();
    release.WaitForNotification();
  });
  const std::vector<int32_t> prompt = {1, 2, 3};
  grpc::Status status;
  std::vector<int32_t> tokens;
  std::thread client([&] {
    grpc::ClientContext ctx;
    std::tie(status, tokens) = Generate(Request(prompt, 6), &ctx);
  });
  in_step.WaitForNotification();  // the request is being computed
  std::thread stopper([this] { server_->Shutdown(absl::Seconds(30)); });
  // Wait (on the server's state, not a timer) until draining has begun.
  while (server_->serving() || !server_->load().draining) std::this_thread::yield();
  EXPECT_EQ(Health(), testing::HealthStatus::kNotServing);
  grpc::ClientContext late;
  EXPECT_EQ(Generate(Request(prompt, 2), &late).first.error_code(), grpc::StatusCode::UNAVAILABLE);
  release.Notify();
  stopper.join();
  client.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens, scripted_->Continue(prompt, 6));
}

TEST_F(WorkerServerTest, ShutdownCancelsWhatOutlivesTheGrace) {
  MockBackendOptions mo;
  mo.step_delay_us = 2000;  // 400 tokens take ~0.8 s; the grace is 0.1 s
  auto mock = CreateMockBackend(mo);
  ASSERT_TRUE(mock.ok());
  Start(*std::move(mock));
  grpc::Status status;
  absl::Notification first_token;
  std::thread client([&] {
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, Request({65, 66}, 400));
    v1::GenerateResponse resp;
    bool seen = false;
    while (reader->Read(&resp)) {
      if (!seen && resp.deltas_size() > 0) first_token.Notify(), seen = true;
    }
    status = reader->Finish();
  });
  first_token.WaitForNotification();
  const auto start = std::chrono::steady_clock::now();
  server_->Shutdown(absl::Milliseconds(100));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  client.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  EXPECT_LT(took, 3.0);
  EXPECT_EQ(server_->load().active, 0);
}

TEST_F(WorkerServerTest, CancelAndDeadlineEndTheStreamAndFreeTheBlocks) {
  MockBackendOptions mo;
  mo.step_delay_us = 1000;  // 4000 tokens would take 4 s
  auto mock = CreateMockBackend(mo);
  ASSERT_TRUE(mock.ok());
  Start(*std::move(mock));
  {
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, Request({65, 66, 67}, 4000));
    v1::GenerateResponse resp;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(reader->Read(&resp));
    const EngineLoad busy = server_->load();
    EXPECT_GT(busy.kv_blocks_total - busy.kv_blocks_free, 0);
    ctx.TryCancel();
    while (reader->Read(&resp)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    EXPECT_EQ(Generate(Request({65, 66, 67}, 4000), &ctx).first.error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  // Both requests are gone from the engine, and their blocks with them.
  EXPECT_TRUE(server_->WaitUntilIdle(absl::Seconds(5)));
  const EngineLoad load = server_->load();
  EXPECT_EQ(load.active, 0);
  EXPECT_EQ(load.kv_blocks_free, load.kv_blocks_total);
}

}  // namespace
}  // namespace pagellm

namespace pagellm {
namespace {

// Runtime LoRA updating over the Worker service: a mock backend with two adapter slots, adapters
// under a temporary --lora-dir, a loader that takes any directory but one named "bad".
class RuntimeLoraServerTest : public WorkerServerTest {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("pagellm_lora_dir_", ::getpid(), "_", reinterpret_cast<uintptr_t>(this));
    for (const char* d : {"a", "b", "c", "bad"}) std::filesystem::create_directories(dir_ / d);
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  void StartWith(bool enabled) {
    MockBackendOptions mo;
    mo.max_loras = 2;
    auto backend = CreateMockBackend(mo);
    ASSERT_TRUE(backend.ok());
    RuntimeLoraOptions lora;
    lora.enabled = enabled;
    lora.lora_dir = dir_.string();
    lora.load =
        [this](const LoraModuleSpec& spec) -> absl::StatusOr<std::shared_ptr<const LoraAdapter>> {
      if (!std::filesystem::is_directory(spec.path)) return absl::NotFoundError("gone");
      if (std::filesystem::path(spec.path).filename() == "bad") {
        return absl::InvalidArgumentError("not an adapter");
      }
      {
        std::lock_guard<std::mutex> lock(reads_mu_);
        ++reads_[std::filesystem::path(spec.path).filename().string()];
      }
      auto a = std::make_shared<LoraAdapter>();
      a->name = spec.name;
      a->path = spec.path;
      return a;
    };
    Start(*std::move(backend), false, "", std::move(lora));
  }
  std::pair<grpc::Status, std::vector<std::string>> Load(const std::string& name,
                                                         const std::string& path) {
    grpc::ClientContext ctx;
    v1::LoadLoraAdapterRequest r;
    r.set_lora_name(name);
    r.set_lora_path(path);
    v1::LoraAdaptersResponse resp;
    grpc::Status st = stub_->LoadLoraAdapter(&ctx, r, &resp);
    return {st, {resp.lora_adapters().begin(), resp.lora_adapters().end()}};
  }
  grpc::Status Unload(const std::string& name) {
    grpc::ClientContext ctx;
    v1::UnloadLoraAdapterRequest r;
    r.set_lora_name(name);
    v1::LoraAdaptersResponse resp;
    return stub_->UnloadLoraAdapter(&ctx, r, &resp);
  }
  std::vector<std::string> Polled() {
    grpc::ClientContext ctx;
    v1::WorkerLoad load;
    EXPECT_TRUE(stub_->GetLoad(&ctx, {}, &load).ok());
    return {load.lora_adapters().begin(), load.lora_adapters().end()};
  }
  // The runtime-loaded adapters a poll lists, as "name=path".
  std::vector<std::string> PolledRuntime() {
    grpc::ClientContext ctx;
    v1::WorkerLoad load;
    EXPECT_TRUE(stub_->GetLoad(&ctx, {}, &load).ok());
    std::vector<std::string> out;
    for (const auto& a : load.runtime_lora_adapters()) {
      out.push_back(a.lora_name() + "=" + a.lora_path());
    }
    return out;
  }
  // Reads of each directory (by its name) so far.
  int Reads(const std::string& dir) {
    std::lock_guard<std::mutex> lock(reads_mu_);
    return reads_[dir];
  }
  // A 3-token greedy request with `adapter`.
  grpc::Status GenerateWith(const std::string& adapter) {
    v1::WorkerGenerateRequest r = Request({72, 101}, 3);
    r.mutable_sampling()->set_lora_adapter(adapter);
    grpc::ClientContext ctx;
    const auto [st, tokens] = Generate(r, &ctx);
    if (st.ok()) {
      EXPECT_EQ(tokens.size(), 3u);
    }
    return st;
  }
  std::filesystem::path dir_;
  std::mutex reads_mu_;
  std::map<std::string, int> reads_;
};

TEST_F(RuntimeLoraServerTest, AdaptersLoadServeAndUnload) {
  StartWith(true);
  EXPECT_TRUE(Polled().empty());
  auto [st, served] = Load("sql", "a");
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(served, std::vector<std::string>{"sql"});
  // What the router polls and what it asks for the model both list it from now on.
  EXPECT_EQ(Polled(), std::vector<std::string>{"sql"});
  grpc::ClientContext info_ctx;
  v1::ModelInfo info;
  ASSERT_TRUE(stub_->GetModelInfo(&info_ctx, {}, &info).ok());
  EXPECT_EQ(std::vector<std::string>(info.lora_adapters().begin(), info.lora_adapters().end()),
            std::vector<std::string>{"sql"});
  // A request runs with it.
  v1::WorkerGenerateRequest r = Request({72, 101}, 3);
  r.mutable_sampling()->set_lora_adapter("sql");
  {
    grpc::ClientContext ctx;
    const auto [gen, tokens] = Generate(r, &ctx);
    EXPECT_TRUE(gen.ok()) << gen.error_message();
    EXPECT_EQ(tokens.size(), 3u);
  }
  // An absolute path inside the directory works too.
  std::tie(st, served) = Load("chat", (dir_ / "b").string());
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(served, (std::vector<std::string>{"sql", "chat"}));
  // Polls list them with their paths as given, for a router to load on workers that join later.
  EXPECT_EQ(PolledRuntime(), (std::vector<std::string>{"sql=a", "chat=" + (dir_ / "b").string()}));

  EXPECT_EQ(Load("sql", "c").first.error_code(), grpc::StatusCode::ALREADY_EXISTS);

  ASSERT_TRUE(Unload("sql").ok());
  EXPECT_EQ(Polled(), std::vector<std::string>{"chat"});
  EXPECT_EQ(PolledRuntime(), std::vector<std::string>{"chat=" + (dir_ / "b").string()});
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(Generate(r, &ctx).first.error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_EQ(Unload("sql").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Load("third", "c").first.ok());  // the freed slot
}

// Two adapters fit in host memory (--max-cpu-loras defaults to the two slots); more are served.
TEST_F(RuntimeLoraServerTest, ServesMoreAdaptersThanItHoldsReadingThemAgainWhenNeeded) {
  StartWith(true);
  ASSERT_TRUE(Load("x", "a").first.ok());
  ASSERT_TRUE(Load("y", "b").first.ok());
  ASSERT_TRUE(GenerateWith("x").ok());
  ASSERT_TRUE(GenerateWith("y").ok());
  // A third: x, used longest ago, lets go of its weights (vLLM's LRU over --max-cpu-loras).
  auto [st, served] = Load("z", "c");
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(served, (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(Reads("a"), 1);
  // A request for x waits while its directory is read again, then runs; y, used as long ago as
  // z was loaded (and first of the two), made room.
  const grpc::Status again = GenerateWith("x");
  EXPECT_TRUE(again.ok()) << again.error_message();
  EXPECT_EQ(Reads("a"), 2);
  // y's directory is gone: its request ends INTERNAL (not UNAVAILABLE, which would take the
  // worker out of a router's use) and the worker serves on. z made room for the read.
  std::filesystem::remove_all(dir_ / "b");
  const grpc::Status gone = GenerateWith("y");
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::INTERNAL) << gone.error_message();
  EXPECT_NE(gone.error_message().find("could not be read again"), std::string::npos)
      << gone.error_message();
  EXPECT_EQ(Reads("b"), 1);
  // z's directory replaced by a link out of --lora-dir: not followed.
  std::filesystem::remove_all(dir_ / "c");
  std::filesystem::create_directory_symlink("/etc", dir_ / "c");
  const grpc::Status escaped = GenerateWith("z");
  EXPECT_EQ(escaped.error_code(), grpc::StatusCode::INTERNAL) << escaped.error_message();
  EXPECT_EQ(Reads("c"), 1);
  EXPECT_EQ(Reads("etc"), 0);
  EXPECT_TRUE(GenerateWith("x").ok());
  EXPECT_EQ(Reads("a"), 2);  // still held
  EXPECT_EQ(Polled(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_TRUE(server_->WaitUntilIdle(absl::Seconds(5)));
  const EngineLoad load = server_->load();
  EXPECT_EQ(load.kv_blocks_free, load.kv_blocks_total);
}

TEST_F(RuntimeLoraServerTest, BadNamesPathsAndAdaptersAreRefused) {
  StartWith(true);
  EXPECT_EQ(Load("", "a").first.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Load("a b", "a").first.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Load(std::string(129, 'x'), "a").first.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Load("x", "").first.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Outside --lora-dir, by "..", by an absolute path or by a symbolic link, and missing: one
  // answer, which says nothing about the host's files.
  std::filesystem::create_directory_symlink("/etc", dir_ / "escape");
  for (const char* path : {"../", "a/../../", "/etc", "escape", "missing", "/nonexistent"}) {
    const grpc::Status st = Load("x", path).first;
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << path;
    EXPECT_EQ(st.error_message(), "lora_path names no directory inside the worker's --lora-dir")
        << path;
  }
  const grpc::Status bad = Load("x", "bad").first;
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.error_message();
  EXPECT_TRUE(Polled().empty());
}

TEST_F(RuntimeLoraServerTest, OffByDefault) {
  StartWith(false);
  const grpc::Status st = Load("sql", "a").first;
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("--allow-runtime-lora-updating"), std::string::npos);
  EXPECT_EQ(Unload("sql").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST(RuntimeLoraTest, NeedsAnExistingLoraDir) {
  RuntimeLoraOptions o;
  o.enabled = true;
  o.load = [](const LoraModuleSpec&) -> absl::StatusOr<std::shared_ptr<const LoraAdapter>> {
    return nullptr;
  };
  EXPECT_EQ(RuntimeLora::Create(nullptr, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.lora_dir = "/nonexistent-lora-dir";
  EXPECT_EQ(RuntimeLora::Create(nullptr, o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagellm
