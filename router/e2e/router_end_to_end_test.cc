// End to end through a real RouterServer (gRPC on 127.0.0.1) in front of in-process fake
// workers (router_test_fixture.h): streaming, cancellation, deadlines, admission, health,
// reflection, metrics, the local unary calls and draining. Worker failures:
// router_failover_test.cc.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "common/testing/grpc_probe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagellm/v1/generation.grpc.pb.h"
#include "router/e2e/router_test_fixture.h"
#include "router/router_server.h"
#include "router/testing/fake_worker.h"

namespace pagellm {
namespace {

using ::testing::Contains;
using testing::FakeWorker;
using ::testing::HasSubstr;
using testing::HealthStatus;
using testing::Load;
using testing::Request;
using testing::RouterTest;
using testing::StreamResult;
using testing::WaitFor;

// GenerateRequest.return_prompt_token_ids: the stream's first message carries the prompt as the
// worker got it (the text's ids, BOS first), and no other message does.
TEST_F(RouterTest, ThePromptsIdsComeOnTheFirstMessageWhenAsked) {
  AddWorker();
  StartRouter();
  v1::GenerateRequest request = Request("ids", 4);
  request.set_return_prompt_token_ids(true);
  const StreamResult r = Generate(request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_GE(r.messages.size(), 2u);
  EXPECT_THAT(r.messages[0].prompt_token_ids(), ::testing::ElementsAre(256, 'h', 'i'));
  for (size_t i = 1; i < r.messages.size(); ++i) {
    EXPECT_EQ(r.messages[i].prompt_token_ids_size(), 0) << i;
  }
  const StreamResult plain = Generate(Request("plain", 4));
  ASSERT_TRUE(plain.status.ok());
  EXPECT_EQ(plain.messages[0].prompt_token_ids_size(), 0);
}

TEST_F(RouterTest, StreamsTheWorkersTokensUnderTheClientsRequestId) {
  FakeWorker& w = AddWorker();
  StartRouter();
  v1::GenerateRequest req = Request("client-1", 5);
  req.mutable_sampling()->set_temperature(0.5f);
  StreamResult r = Generate(req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens, 5);
  ASSERT_EQ(r.messages.size(), 5u);
  for (const auto& m : r.messages) EXPECT_EQ(m.request_id(), "client-1");
  EXPECT_TRUE(r.messages.back().finished());
  EXPECT_EQ(r.messages.back().usage().prompt_tokens(), 3);
  EXPECT_EQ(r.messages[0].deltas(0).text(), "a");

  ASSERT_EQ(w.requests().size(), 1u);
  const v1::WorkerGenerateRequest seen = w.requests()[0];
  EXPECT_THAT(seen.prompt_token_ids(), ::testing::ElementsAre(256, 'h', 'i'));
  EXPECT_FLOAT_EQ(seen.sampling().temperature(), 0.5f);
  EXPECT_EQ(seen.sampling().max_tokens(), 5);
  EXPECT_NE(seen.request_id(), "client-1") << "the worker gets a router-unique id";
  EXPECT_TRUE(absl::StartsWith(seen.request_id(), "client-1"));
}

TEST_F(RouterTest, MakesARequestIdWhenTheClientGivesNone) {
  AddWorker();
  StartRouter();
  StreamResult r = Generate(Request("", 2));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_FALSE(r.messages.empty());
  EXPECT_FALSE(r.messages[0].request_id().empty());
  EXPECT_EQ(r.messages[0].request_id(), r.messages.back().request_id());
}

TEST_F(RouterTest, SixtyFourConcurrentStreamsAllComplete) {
  FakeWorker::Options o;
  o.token_interval = absl::Milliseconds(1);
  FakeWorker& a = AddWorker(o);
  FakeWorker& b = AddWorker(o);
  StartRouter();
  constexpr int kStreams = 64;
  std::vector<StreamResult> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] { results[i] = Generate(Request(absl::StrCat("s", i), 20)); });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(results[i].status.ok()) << i << ": " << results[i].status.error_message();
    EXPECT_EQ(results[i].tokens, 20) << i;
    EXPECT_EQ(results[i].messages.back().request_id(), absl::StrCat("s", i));
  }
  EXPECT_EQ(a.completed() + b.completed(), kStreams);
  EXPECT_GT(a.completed(), 0);
  EXPECT_GT(b.completed(), 0);
  EXPECT_TRUE(WaitFor([&] { return router_->queue_length() == 0; }));
}

TEST_F(RouterTest, ClientCancelReachesTheWorkerWithinASecond) {
  FakeWorker& w = AddWorker();
  w.SetStall(true);
  StartRouter();
  grpc::ClientContext context;
  StreamResult r;
  std::thread client([&] { r = Read(&context, Request("c")); });
  ASSERT_TRUE(w.WaitForActiveStreams(1, absl::Seconds(5)));
  const absl::Time cancelled_at = absl::Now();
  context.TryCancel();
  EXPECT_TRUE(w.WaitForCancellations(1, absl::Seconds(1)));
  EXPECT_LT(absl::Now() - cancelled_at, absl::Seconds(1));
  client.join();
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(w.WaitForActiveStreams(0, absl::Seconds(5)));
}

TEST_F(RouterTest, DeadlineEndsTheStreamAndCancelsTheWorkerCall) {
  FakeWorker& w = AddWorker();
  w.SetStall(true);
  StartRouter();
  StreamResult r = Generate(Request("d"), absl::Milliseconds(300));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(r.took, absl::Seconds(2));
  EXPECT_TRUE(w.WaitForCancellations(1, absl::Seconds(1)));
  EXPECT_TRUE(w.WaitForActiveStreams(0, absl::Seconds(5)));
}

TEST_F(RouterTest, RequestTimeoutAppliesWhenTheClientSetsNoDeadline) {
  FakeWorker& w = AddWorker();
  w.SetStall(true);
  RouterServer::Options o = DefaultOptions();
  o.request_timeout = absl::Milliseconds(300);
  StartRouter(std::move(o));
  StreamResult r = Generate(Request("t"), absl::InfiniteDuration());
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(r.took, absl::Seconds(3));
  EXPECT_TRUE(w.WaitForActiveStreams(0, absl::Seconds(5)));
}

TEST_F(RouterTest, BadRequestIsRefusedWithoutReachingAWorker) {
  FakeWorker& w = AddWorker();
  StartRouter();
  v1::GenerateRequest req = Request("bad");
  req.mutable_sampling()->set_max_tokens(1000);
  StreamResult r = Generate(req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("exceeds the maximum model length of 64"));
  EXPECT_EQ(w.generate_calls(), 0);
}

// Issue 9: bytes protobuf cannot parse (text that is not UTF-8, garbage) get INVALID_ARGUMENT
// naming the problem on every method that takes client text, never gRPC's empty UNIMPLEMENTED,
// and never reach a worker.
TEST_F(RouterTest, MalformedRequestsGetInvalidArgumentNamingTheProblem) {
  FakeWorker& w = AddWorker();
  StartRouter();
  StreamResult r = Generate(Request("bad", 5, "\xff\xfe bad"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "text is not valid UTF-8");
  EXPECT_EQ(w.generate_calls(), 0);

  struct Case {
    std::string method, wire, message;
  } cases[] = {
      {"Tokenize", std::string("\x0a\x02\xff\xfe", 4), "text is not valid UTF-8"},
      {"Tokenize", std::string("\xff\xff\xff", 3),
       "the request is not a pagellm.v1.TokenizeRequest"},
      {"Detokenize", std::string("\xff\xff\xff", 3),
       "the request is not a pagellm.v1.DetokenizeRequest"},
      {"Generate", std::string("\xff\xff\xff", 3),
       "the request is not a pagellm.v1.GenerateRequest"},
  };
  for (const Case& c : cases) {
    std::string reply;
    const grpc::Status s =
        testing::CallRaw(channel_, "/pagellm.v1.Generation/" + c.method, c.wire, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.method;
    EXPECT_EQ(s.error_message(), c.message) << c.method;
  }
  // Tokenize is bounded like a prompt: text that cannot fit the model is refused up front.
  grpc::ClientContext c;
  v1::TokenizeRequest req;
  req.set_text(std::string(1 << 20, 'x'));
  v1::TokenizeResponse resp;
  const grpc::Status s = stub_->Tokenize(&c, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("text is 1048576 bytes long"));
  EXPECT_EQ(w.generate_calls(), 0);
}

// Issue 9: the router follows its workers. A worker that serves another model (here: one whose
// polls report another fingerprint, as after a restart with another model) gets no requests
// and is counted; a worker's new, smaller limits apply from its next poll on.
TEST_F(RouterTest, WorkersOfAnotherModelAreNotUsedAndLimitsFollowTheWorkers) {
  FakeWorker::Options a;
  a.info.set_model_fingerprint("model-a");
  a.load.set_model_fingerprint("model-a");
  a.load.set_max_model_len(64);
  FakeWorker& wa = AddWorker(a);
  FakeWorker::Options b = a;
  b.load.set_model_fingerprint("model-b");
  FakeWorker& wb = AddWorker(b);
  StartRouter(DefaultOptions(), /*wait_ready=*/false);
  ASSERT_TRUE(WaitFor([&] {
    const WorkerPool::Stats st = router_->worker_stats();
    return router_->serving() && st.ready == 1 && st.mismatched == 1;
  }));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(Generate(Request(absl::StrCat("r", i), 2)).status.ok());
  }
  EXPECT_EQ(wa.generate_calls(), 4);
  EXPECT_EQ(wb.generate_calls(), 0);

  // Worker a restarts with max_model_len 16: "hi" (3 tokens) + 20 no longer fits.
  EXPECT_TRUE(Generate(Request("fits-before", 20)).status.ok());
  v1::WorkerLoad smaller = a.load;
  smaller.set_max_model_len(16);
  wa.SetLoad(smaller);
  ASSERT_TRUE(WaitFor([&] { return router_->worker_stats().max_model_len == 16; }));
  StreamResult r = Generate(Request("too-long-now", 20));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("exceeds the maximum model length of 16"));
  grpc::ClientContext c;
  v1::ModelInfo info;
  ASSERT_TRUE(stub_->GetModelInfo(&c, {}, &info).ok());
  EXPECT_EQ(info.max_model_len(), 16);
}

// Every worker restarted with another model: the router takes up the new model.
TEST_F(RouterTest, TheRouterTakesUpANewModelWhenNoWorkerServesTheOldOne) {
  FakeWorker::Options a;
  a.info.set_model_fingerprint("model-a");
  a.load.set_model_fingerprint("model-a");
  FakeWorker& w = AddWorker(a);
  StartRouter();
  v1::WorkerLoad now_b = a.load;
  now_b.set_model_fingerprint("model-b");
  v1::ModelInfo info_b = a.info;
  info_b.set_model_fingerprint("model-b");
  info_b.set_model_name("fake-model-b");
  w.SetInfo(info_b);
  w.SetLoad(now_b);
  ASSERT_TRUE(WaitFor([&] {
    grpc::ClientContext c;
    v1::ModelInfo got;
    return stub_->GetModelInfo(&c, {}, &got).ok() && got.model_name() == "fake-model-b" &&
           router_->serving();
  }));
  EXPECT_TRUE(Generate(Request("on-b", 2)).status.ok());
}

TEST_F(RouterTest, PromptThatFitsNoWorkerIsOutOfRange) {
  FakeWorker::Options o;
  o.load = Load(2, 2);  // 2 blocks of 4 tokens; "hi" + BOS needs 2, 20 ids need 6
  AddWorker(o);
  StartRouter();
  v1::GenerateRequest req;
  for (int i = 0; i < 20; ++i) req.mutable_token_ids()->add_ids('a');
  StreamResult r = Generate(req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::OUT_OF_RANGE);  // no retry can help
  EXPECT_TRUE(Generate(Request("fits", 2)).status.ok());
}

TEST_F(RouterTest, QueuedRequestsGoInArrivalOrderWhenRoomAppears) {
  FakeWorker::Options o;
  o.load = Load(0);
  FakeWorker& w = AddWorker(o);
  StartRouter();
  std::vector<std::thread> clients;
  std::vector<StreamResult> results(3);
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] { results[i] = Generate(Request(absl::StrCat("q", i), 2)); });
    ASSERT_TRUE(WaitFor([&] { return router_->queue_length() == static_cast<size_t>(i + 1); }));
  }
  EXPECT_EQ(w.generate_calls(), 0);
  // Room for one request (2 blocks) at a time: the next goes when the previous one has sent its
  // first token, so the worker sees them in the router's dispatch order.
  w.SetLoad(Load(2));
  for (auto& c : clients) c.join();
  for (const auto& r : results) EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  const auto seen = w.requests();
  ASSERT_EQ(seen.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(absl::StartsWith(seen[i].request_id(), absl::StrCat("q", i, "@")))
        << seen[i].request_id();
  }
}

// --scheduling-policy priority: queued requests go by (priority, arrival); under fcfs (the
// default) a nonzero priority is INVALID_ARGUMENT and reaches no worker.
TEST_F(RouterTest, PriorityOrdersTheQueueAndIsRefusedUnderFcfs) {
  {
    FakeWorker& w = AddWorker();
    StartRouter();
    v1::GenerateRequest req = Request("p");
    req.mutable_sampling()->set_priority(1);
    const StreamResult r = Generate(req);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(r.status.error_message(), HasSubstr("--scheduling-policy"));
    EXPECT_EQ(w.generate_calls(), 0);
    router_->Shutdown(absl::ZeroDuration());
    workers_.clear();
  }
  FakeWorker::Options o;
  o.load = Load(0);
  FakeWorker& w = AddWorker(o);
  RouterServer::Options ro = DefaultOptions();
  ro.priority_scheduling = true;
  StartRouter(ro);
  const int32_t priorities[] = {5, 0, 5, -1};  // q0 (batch), q1, q2 (batch), q3 (urgent)
  std::vector<std::thread> clients;
  std::vector<StreamResult> results(4);
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      v1::GenerateRequest req = Request(absl::StrCat("q", i), 2);
      req.mutable_sampling()->set_priority(priorities[i]);
      results[i] = Generate(req);
    });
    ASSERT_TRUE(WaitFor([&] { return router_->queue_length() == static_cast<size_t>(i + 1); }));
  }
  w.SetLoad(Load(2));  // room for one at a time
  for (auto& c : clients) c.join();
  for (const auto& r : results) EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  const auto seen = w.requests();
  ASSERT_EQ(seen.size(), 4u);
  const int expected[] = {3, 1, 0, 2};
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(absl::StartsWith(seen[i].request_id(), absl::StrCat("q", expected[i], "@")))
        << i << ": " << seen[i].request_id();
    EXPECT_EQ(seen[i].sampling().priority(), priorities[expected[i]]);  // the worker sees it
  }
}

TEST_F(RouterTest, CancelledWhileQueuedIsDropped) {
  FakeWorker::Options o;
  o.load = Load(0);
  FakeWorker& w = AddWorker(o);
  StartRouter();
  grpc::ClientContext context;
  StreamResult r;
  std::thread client([&] { r = Read(&context, Request("queued")); });
  ASSERT_TRUE(WaitFor([&] { return router_->queue_length() == 1; }));
  context.TryCancel();
  client.join();
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return router_->queue_length() == 0; }));
  w.SetLoad(Load(1000));
  EXPECT_TRUE(Generate(Request("next", 2)).status.ok());
  EXPECT_EQ(w.generate_calls(), 1) << "the cancelled request never reached the worker";
}

TEST_F(RouterTest, DeadlineWhileQueuedIsDeadlineExceeded) {
  FakeWorker::Options o;
  o.load = Load(0);
  FakeWorker& w = AddWorker(o);
  StartRouter();
  StreamResult r = Generate(Request("late"), absl::Milliseconds(200));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(WaitFor([&] { return router_->queue_length() == 0; }));
  EXPECT_EQ(w.generate_calls(), 0);
}

TEST_F(RouterTest, FullQueueIsResourceExhaustedAtOnce) {
  FakeWorker::Options o;
  o.load = Load(0);
  AddWorker(o);
  RouterServer::Options ro = DefaultOptions();
  ro.max_queue = 1;
  StartRouter(std::move(ro));
  grpc::ClientContext context;
  StreamResult first;
  std::thread client([&] { first = Read(&context, Request("waits")); });
  ASSERT_TRUE(WaitFor([&] { return router_->queue_length() == 1; }));
  StreamResult second = Generate(Request("refused"));
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_LT(second.took, absl::Seconds(1));
  context.TryCancel();
  client.join();
}

TEST_F(RouterTest, UnavailableUntilAWorkerAnswers) {
  FakeWorker& w = AddWorker();
  w.Kill();
  StartRouter(DefaultOptions(), /*wait_ready=*/false);
  EXPECT_EQ(Generate(Request("early")).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  auto health = testing::CheckHealth(channel_, "");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, HealthStatus::kNotServing);

  w.Restart();
  ASSERT_TRUE(WaitFor([&] { return router_->serving(); }));
  EXPECT_EQ(*testing::CheckHealth(channel_, ""), HealthStatus::kServing);
  EXPECT_EQ(*testing::CheckHealth(channel_, "pagellm.v1.Generation"), HealthStatus::kServing);
  EXPECT_TRUE(Generate(Request("now", 2)).status.ok());

  w.Kill();
  ASSERT_TRUE(WaitFor([&] { return !router_->serving(); }));
  EXPECT_EQ(*testing::CheckHealth(channel_, ""), HealthStatus::kNotServing);
  EXPECT_EQ(Generate(Request("gone")).status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(RouterTest, ReflectionListsTheServices) {
  AddWorker();
  StartRouter();
  auto services = testing::ListServices(channel_);
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, Contains("pagellm.v1.Generation"));
  EXPECT_THAT(*services, Contains("grpc.health.v1.Health"));
}

TEST_F(RouterTest, MetricsEndpointExposesTheRouterMetrics) {
  AddWorker();
  RouterServer::Options o = DefaultOptions();
  o.metrics_address = "127.0.0.1:0";
  StartRouter(std::move(o));
  ASSERT_TRUE(Generate(Request("m", 2)).status.ok());
  v1::GenerateRequest bad = Request("bad");
  bad.mutable_sampling()->set_top_p(2.0f);
  ASSERT_EQ(Generate(bad).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The stream's gauge drops in OnDone, which may run just after the client has its status.
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(router_->metrics().Serialize(), "pagellm_router_active_streams 0");
  }));
  ASSERT_NE(router_->metrics_port(), 0);
  auto body = testing::HttpGet(router_->metrics_port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  for (const char* name :
       {"pagellm_router_queue_length 0", "pagellm_router_workers_ready 1",
        "pagellm_router_requests_total{code=\"OK\"} 1",
        "pagellm_router_requests_total{code=\"INVALID_ARGUMENT\"} 1",
        "pagellm_router_time_to_first_token_seconds_count 1", "pagellm_router_active_streams 0"}) {
    EXPECT_THAT(*body, HasSubstr(name));
  }
  // The exposition format is what Prometheus accepts (checked when promtool is installed).
  if (std::system("command -v promtool > /dev/null 2>&1") == 0) {
    const std::string path = ::testing::TempDir() + "router_metrics.txt";
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fwrite(body->data(), 1, body->size(), f);
    std::fclose(f);
    EXPECT_EQ(std::system(("promtool check metrics < " + path).c_str()), 0);
  }
}

TEST_F(RouterTest, TokenizeDetokenizeAndModelInfoAreServedLocally) {
  FakeWorker& w = AddWorker();
  StartRouter();
  {
    grpc::ClientContext c;
    v1::ModelInfo info;
    ASSERT_TRUE(stub_->GetModelInfo(&c, {}, &info).ok());
    EXPECT_EQ(info.model_name(), "fake-model");
    EXPECT_EQ(info.max_model_len(), 64);
  }
  {
    grpc::ClientContext c;
    v1::TokenizeRequest req;
    req.set_text("hi");
    v1::TokenizeResponse resp;
    ASSERT_TRUE(stub_->Tokenize(&c, req, &resp).ok());
    EXPECT_THAT(resp.token_ids(), ::testing::ElementsAre(256, 'h', 'i'));
  }
  {
    grpc::ClientContext c;
    v1::TokenizeRequest req;
    req.mutable_chat()->add_messages()->set_content("hi");
    v1::TokenizeResponse resp;
    EXPECT_EQ(stub_->Tokenize(&c, req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << "the fake model has no chat template";
  }
  {
    grpc::ClientContext c;
    v1::DetokenizeRequest req;
    for (int id : {256, int{'h'}, int{'i'}}) req.add_token_ids(id);
    v1::DetokenizeResponse resp;
    ASSERT_TRUE(stub_->Detokenize(&c, req, &resp).ok());
    EXPECT_EQ(resp.text(), "<s>hi") << "special tokens are kept by default, as HF decode does";
    grpc::ClientContext c2;
    req.set_skip_special_tokens(true);
    ASSERT_TRUE(stub_->Detokenize(&c2, req, &resp).ok());
    EXPECT_EQ(resp.text(), "hi");
  }
  {
    grpc::ClientContext c;
    v1::DetokenizeRequest req;
    req.add_token_ids(260);
    v1::DetokenizeResponse resp;
    EXPECT_EQ(stub_->Detokenize(&c, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  EXPECT_EQ(w.generate_calls(), 0);
}

TEST_F(RouterTest, ChatPromptsAreRenderedWithTheWorkersTemplate) {
  FakeWorker::Options o;
  o.info.set_chat_template(
      "{% for m in messages %}"
      "{% if m['role'] not in ['system', 'user', 'assistant'] %}"
      "{{ raise_exception('Unknown role: ' + m['role']) }}{% endif %}"
      "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  FakeWorker& w = AddWorker(o);
  StartRouter();
  v1::TokenizeRequest tokenize;
  v1::ChatMessage* m = tokenize.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  v1::TokenizeResponse tokens;
  grpc::ClientContext c;
  grpc::Status s = stub_->Tokenize(&c, tokenize, &tokens);
  if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) GTEST_SKIP() << s.error_message();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(tokens.rendered_prompt(), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");

  v1::GenerateRequest req;
  *req.mutable_chat() = tokenize.chat();
  req.mutable_sampling()->set_max_tokens(2);
  StreamResult r = Generate(req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(w.requests().size(), 1u);
  EXPECT_THAT(w.requests()[0].prompt_token_ids(),
              ::testing::ElementsAreArray(tokens.token_ids().begin(), tokens.token_ids().end()));
  EXPECT_EQ(w.requests()[0].prompt_token_ids(0), 258) << "<|im_start|> parsed as a special token";

  req.mutable_chat()->mutable_messages(0)->set_role("robot");
  r = Generate(req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "Unknown role: robot");  // the template's own message
  EXPECT_EQ(w.generate_calls(), 1);
}

TEST_F(RouterTest, ChatTemplateKwargsReachTheTemplate) {
  FakeWorker::Options o;
  o.info.set_chat_template(
      "{% if enable_thinking is defined and not enable_thinking %}/no_think {% endif %}"
      "{{ messages[0]['content'] }}");
  AddWorker(o);
  StartRouter();
  auto render = [&](const std::string& kwargs, std::string* out) {
    v1::TokenizeRequest req;
    v1::ChatMessage* m = req.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content("hi");
    req.mutable_chat()->set_chat_template_kwargs(kwargs);
    v1::TokenizeResponse resp;
    grpc::ClientContext c;
    grpc::Status s = stub_->Tokenize(&c, req, &resp);
    *out = s.ok() ? resp.rendered_prompt() : s.error_message();
    return s.error_code();
  };
  std::string text;
  ASSERT_EQ(render("", &text), grpc::StatusCode::OK) << text;
  EXPECT_EQ(text, "hi");
  ASSERT_EQ(render(R"({"enable_thinking": false})", &text), grpc::StatusCode::OK) << text;
  EXPECT_EQ(text, "/no_think hi");
  ASSERT_EQ(render(R"({"enable_thinking": true})", &text), grpc::StatusCode::OK) << text;
  EXPECT_EQ(text, "hi");
  EXPECT_EQ(render(R"({"messages": []})", &text), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(text, HasSubstr("messages"));
  EXPECT_EQ(render("[1]", &text), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(RouterTest, DrainingFinishesOpenStreamsAndRefusesNewOnes) {
  FakeWorker::Options o;
  o.token_interval = absl::Milliseconds(10);
  AddWorker(o);
  StartRouter();
  grpc::ClientContext context;
  auto reader = stub_->Generate(&context, Request("open", 30));
  v1::GenerateResponse m;
  ASSERT_TRUE(reader->Read(&m));
  int tokens = 1;
  std::thread drain([&] { router_->Shutdown(absl::Seconds(10)); });
  ASSERT_TRUE(WaitFor([&] { return !router_->serving(); }));
  EXPECT_EQ(*testing::CheckHealth(channel_, ""), HealthStatus::kNotServing);
  EXPECT_EQ(Generate(Request("new")).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  while (reader->Read(&m)) tokens += m.deltas(0).token_ids_size();
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(tokens, 30);
  drain.join();
}

}  // namespace
}  // namespace pagellm
