// The Worker gRPC service end to end in one process: a real server on a loopback port over the
// default model (worker/server/worker_service_test.cc covers it without a model), called through
// the generated stub. Covers streaming, bad input, cancellation and deadlines (blocks freed), load
// reports, the tokenizer export and draining.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/api/proto_convert.h"
#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/model/model_loader.h"
#include "worker/server/worker_service.h"

namespace pagellm {
namespace {

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

class WorkerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModel)) {
      const char* req = std::getenv("PAGELLM_REQUIRE_MODELS");
      if (req != nullptr && std::string(req) == "1") FAIL() << kModel << " is missing";
      GTEST_SKIP() << kModel << " is missing";
    }
    LoadModelOptions lo;
    lo.path = kModel;
    auto loaded = LoadModel(lo);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = std::move(loaded->tokenizer);
    CpuBackendOptions bo;
    bo.threads = 2;
    bo.num_kv_blocks = 256;
    auto backend = CreateCpuBackend(loaded->checkpoint, bo);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    auto engine = Engine::Create(backend_.get(), tokenizer_.get(), EngineOptions());
    ASSERT_TRUE(engine.ok()) << engine.status();
    EngineLoop::Options loop_options;
    loop_options.block_size = backend_->block_size();
    loop_options.metrics = &metrics_;
    loop_ = EngineLoop::Start(std::move(*engine), std::move(loop_options));
    v1::ModelInfo info;
    info.set_vocab_size(backend_->config().vocab_size);
    service_ = std::make_unique<WorkerService>(loop_.get(), tokenizer_.get(), info);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Worker::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                    grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (loop_ != nullptr) loop_->Stop();
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
  }

  v1::WorkerGenerateRequest Request(const std::string& prompt, int32_t max_tokens) const {
    v1::WorkerGenerateRequest r;
    r.set_request_id("client-id");
    for (int32_t id : tokenizer_->Encode(prompt, true, false)) r.add_prompt_token_ids(id);
    r.mutable_sampling()->set_temperature(0.0f);
    r.mutable_sampling()->set_max_tokens(max_tokens);
    r.mutable_sampling()->set_ignore_eos(true);
    return r;
  }

  // Polls until the engine holds no blocks and runs nothing; false after `seconds`.
  bool WaitIdle(double seconds) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      const EngineLoad l = loop_->load();
      if (l.kv_blocks_free == l.kv_blocks_total && l.running == 0 && l.active == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  WorkerMetrics metrics_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<WorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Worker::Stub> stub_;
};

TEST_F(WorkerServiceTest, StreamsTokensThenUsage) {
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, Request("The capital of France is", 6));
  v1::GenerateResponse r;
  std::vector<int32_t> tokens;
  std::string text;
  bool finished = false;
  while (reader->Read(&r)) {
    EXPECT_EQ(r.request_id(), "client-id");
    for (const auto& d : r.deltas()) {
      tokens.insert(tokens.end(), d.token_ids().begin(), d.token_ids().end());
      text += d.text();
    }
    if (r.finished()) {
      finished = true;
      EXPECT_EQ(r.usage().completion_tokens(), 6);
      EXPECT_EQ(r.usage().prompt_tokens(), 5);
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(finished);
  EXPECT_EQ(tokens.size(), 6u);
  EXPECT_NE(text.find("Paris"), std::string::npos) << text;
  EXPECT_TRUE(WaitIdle(1.0));
}

TEST_F(WorkerServiceTest, BadRequestsGetInvalidArgument) {
  v1::WorkerGenerateRequest empty = Request("x", 4);
  empty.clear_prompt_token_ids();
  v1::WorkerGenerateRequest oov = Request("x", 4);
  oov.add_prompt_token_ids(1 << 30);
  v1::WorkerGenerateRequest hot = Request("x", 4);
  hot.mutable_sampling()->set_temperature(-1.0f);
  for (const auto* req : {&empty, &oov, &hot}) {
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, *req);
    v1::GenerateResponse r;
    while (reader->Read(&r)) {
    }
    const grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  EXPECT_TRUE(WaitIdle(1.0));
}

TEST_F(WorkerServiceTest, CancelAndDeadlineFreeTheBlocks) {
  {
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, Request("Once upon a time", 4000));
    v1::GenerateResponse r;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(reader->Read(&r));
    EXPECT_GT(loop_->load().kv_blocks_total - loop_->load().kv_blocks_free, 0);
    ctx.TryCancel();
    while (reader->Read(&r)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(WaitIdle(1.0)) << "blocks still held a second after the cancel";
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
    auto reader = stub_->Generate(&ctx, Request("Once upon a time", 4000));
    v1::GenerateResponse r;
    while (reader->Read(&r)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  EXPECT_TRUE(WaitIdle(1.0)) << "blocks still held a second after the deadline";
}

TEST_F(WorkerServiceTest, LoadAndTokenizerForTheRouter) {
  grpc::ClientContext ctx;
  v1::WorkerLoad load;
  ASSERT_TRUE(stub_->GetLoad(&ctx, v1::GetLoadRequest(), &load).ok());
  EXPECT_EQ(load.kv_blocks_total(), 256);
  EXPECT_EQ(load.kv_blocks_free(), 256);
  EXPECT_EQ(load.block_size(), 16);
  grpc::ClientContext ctx2;
  v1::TokenizerSpec spec;
  ASSERT_TRUE(stub_->GetTokenizer(&ctx2, v1::GetTokenizerRequest(), &spec).ok());
  auto vocab = VocabSpecFromProto(spec);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto copy = Tokenizer::Create(*std::move(vocab));
  ASSERT_TRUE(copy.ok()) << copy.status();
  const std::string text = "Héllo, wörld! <|im_start|>user\n12345";
  EXPECT_EQ((*copy)->Encode(text, true, true), tokenizer_->Encode(text, true, true));
}

TEST_F(WorkerServiceTest, DrainingRefusesNewRequests) {
  loop_->SetDraining();
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, Request("Hello", 2));
  v1::GenerateResponse r;
  while (reader->Read(&r)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::ClientContext ctx2;
  v1::WorkerLoad load;
  ASSERT_TRUE(stub_->GetLoad(&ctx2, v1::GetLoadRequest(), &load).ok());
  EXPECT_TRUE(load.draining());
}

}  // namespace
}  // namespace pagellm
