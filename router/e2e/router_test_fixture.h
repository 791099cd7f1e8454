// Test support for the router tests through a real RouterServer (gRPC on 127.0.0.1) in front of
// in-process fake workers (router_end_to_end_test.cc, router_failover_test.cc).
#ifndef PAGELLM_ROUTER_E2E_ROUTER_TEST_FIXTURE_H_
#define PAGELLM_ROUTER_E2E_ROUTER_TEST_FIXTURE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/testing/grpc_probe.h"
#include "gtest/gtest.h"
#include "pagellm/v1/generation.grpc.pb.h"
#include "router/router_server.h"
#include "router/testing/fake_worker.h"

namespace pagellm::testing {

inline v1::GenerateRequest Request(const std::string& id, int max_tokens = 5,
                                   const std::string& text = "hi") {
  v1::GenerateRequest r;
  r.set_request_id(id);
  r.set_text(text);
  r.mutable_sampling()->set_max_tokens(max_tokens);
  return r;
}

struct StreamResult {
  grpc::Status status;
  std::vector<v1::GenerateResponse> messages;
  int tokens = 0;
  absl::Duration took;
};

class RouterTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (router_ != nullptr) router_->Shutdown(absl::ZeroDuration());
  }

  FakeWorker& AddWorker(FakeWorker::Options o = {}) {
    workers_.push_back(FakeWorker::Start(std::move(o)));
    return *workers_.back();
  }

  // Two workers: `a` (10 ms between tokens) gets the first request, having more free blocks
  // than `b`.
  std::pair<FakeWorker&, FakeWorker&> AddFirstChoiceAndOther() {
    FakeWorker::Options slow;
    slow.token_interval = absl::Milliseconds(10);
    slow.load = Load(1000);
    FakeWorker& a = AddWorker(slow);
    FakeWorker::Options other;
    other.load = Load(500);
    return {a, AddWorker(other)};
  }

  RouterServer::Options DefaultOptions() {
    RouterServer::Options o;
    o.listen_address = "127.0.0.1:0";
    o.metrics_address = "";  // the exposer takes 2 s to stop: only the metrics test has one
    for (const auto& w : workers_) o.workers.addresses.push_back(w->address());
    o.poll_interval = absl::Milliseconds(20);
    o.request_timeout = absl::Seconds(20);
    return o;
  }

  // Starts the router and, when `wait_ready`, waits until it serves with every worker ready.
  void StartRouter(RouterServer::Options o, bool wait_ready = true) {
    auto r = RouterServer::Start(std::move(o));
    ASSERT_TRUE(r.ok()) << r.status();
    router_ = *std::move(r);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", router_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Generation::NewStub(channel_);
    if (wait_ready) {
      ASSERT_TRUE(WaitFor([&] {
        return router_->serving() &&
               router_->worker_stats().ready == static_cast<int>(workers_.size());
      }));
    }
  }
  void StartRouter() { StartRouter(DefaultOptions()); }

  StreamResult Generate(const v1::GenerateRequest& request,
                        absl::Duration deadline = absl::Seconds(20)) {
    grpc::ClientContext context;
    if (deadline != absl::InfiniteDuration()) {
      context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    }
    return Read(&context, request);
  }

  StreamResult Read(grpc::ClientContext* context, const v1::GenerateRequest& request) {
    StreamResult out;
    const absl::Time start = absl::Now();
    auto reader = stub_->Generate(context, request);
    v1::GenerateResponse m;
    while (reader->Read(&m)) {
      for (const auto& d : m.deltas()) out.tokens += d.token_ids_size();
      out.messages.push_back(m);
    }
    out.status = reader->Finish();
    out.took = absl::Now() - start;
    return out;
  }

  std::vector<std::unique_ptr<FakeWorker>> workers_;
  std::unique_ptr<RouterServer> router_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

}  // namespace pagellm::testing

#endif  // PAGELLM_ROUTER_E2E_ROUTER_TEST_FIXTURE_H_
