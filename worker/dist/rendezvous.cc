// The server keeps one map under a mutex; Get waits on a condition for its keys, waking at least
// every 100 ms to notice a cancelled call or a shutdown. Keys are never removed: a group's
// rendezvous lives as long as its rank 0, and the key count is capped.
#include "worker/dist/rendezvous.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/store.h"
#include "grpcpp/grpcpp.h"
#include "pagellm/v1/rendezvous.grpc.pb.h"

namespace pagellm {

class RendezvousService final : public pagellm::v1::Rendezvous::Service {
 public:
  explicit RendezvousService(const RendezvousServer::Options& options) : options_(options) {}

  grpc::Status Set(grpc::ServerContext*, const v1::RendezvousSetRequest* request,
                   v1::RendezvousSetResponse*) override {
    if (request->key().empty() || request->key().size() > options_.max_key_bytes) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("key must be 1 to ", options_.max_key_bytes, " bytes"));
    }
    if (request->value().size() > options_.max_value_bytes) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("value exceeds ", options_.max_value_bytes, " bytes"));
    }
    absl::MutexLock lock(&mu_);
    if (!map_.contains(request->key()) && map_.size() >= options_.max_keys) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("the rendezvous holds ", options_.max_keys, " keys"));
    }
    map_[request->key()] = request->value();
    changed_.SignalAll();
    return grpc::Status::OK;
  }

  grpc::Status Get(grpc::ServerContext* context, const v1::RendezvousGetRequest* request,
                   v1::RendezvousGetResponse* response) override {
    if (request->keys_size() > options_.max_keys_per_get) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("at most ", options_.max_keys_per_get, " keys per Get"));
    }
    const absl::Time give_up = absl::Now() + options_.max_wait;
    absl::MutexLock lock(&mu_);
    while (true) {
      if (shutting_down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
      if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      const bool all = std::all_of(request->keys().begin(), request->keys().end(),
                                   [&](const std::string& k) { return map_.contains(k); });
      if (all) break;
      const absl::Time now = absl::Now();
      if (now >= give_up) {
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "keys not set in time");
      }
      changed_.WaitWithDeadline(&mu_, std::min(give_up, now + absl::Milliseconds(100)));
    }
    for (const std::string& k : request->keys()) response->add_values(map_.at(k));
    return grpc::Status::OK;
  }

  void Shutdown() {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    changed_.SignalAll();
  }

 private:
  const RendezvousServer::Options options_;
  absl::Mutex mu_;
  absl::CondVar changed_;
  absl::flat_hash_map<std::string, std::string> map_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(const Options& options) {
  auto r = std::unique_ptr<RendezvousServer>(new RendezvousServer());
  r->service_ = std::make_unique<RendezvousService>(options);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, grpc::InsecureServerCredentials(), &r->port_);
  builder.RegisterService(r->service_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      options.max_value_bytes + options.max_keys_per_get * options.max_key_bytes + 4096));
  r->server_ = builder.BuildAndStart();
  if (r->server_ == nullptr || r->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous: cannot listen on ", options.listen_address));
  }
  return r;
}

RendezvousServer::~RendezvousServer() { Shutdown(); }

void RendezvousServer::Shutdown() {
  if (server_ == nullptr) return;
  service_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  server_.reset();
}

namespace {

class GrpcStore final : public gloo::rendezvous::Store {
 public:
  GrpcStore(const std::string& target, absl::Duration timeout)
      : stub_(v1::Rendezvous::NewStub(
            grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))),
        timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    v1::RendezvousSetRequest request;
    request.set_key(key);
    request.set_value(std::string(data.begin(), data.end()));
    v1::RendezvousSetResponse response;
    grpc::ClientContext context;
    Prepare(&context, timeout_);
    Check("set", stub_->Set(&context, request, &response));
  }

  std::vector<char> get(const std::string& key) override {
    v1::RendezvousGetResponse response = Get({key}, timeout_);
    const std::string& v = response.values(0);
    return std::vector<char>(v.begin(), v.end());
  }

  void wait(const std::vector<std::string>& keys) override { Get(keys, timeout_); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    Get(keys, std::min(timeout_, absl::FromChrono(timeout)));
  }

 private:
  static void Prepare(grpc::ClientContext* context, absl::Duration timeout) {
    context->set_wait_for_ready(true);  // rank 0's server may not be up yet
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }

  static void Check(const char* what, const grpc::Status& s) {
    if (s.ok()) return;
    const bool late = s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    throw gloo::IoException(
        absl::StrCat("rendezvous ", what, late ? ": timeout: " : ": ", s.error_message()));
  }

  v1::RendezvousGetResponse Get(const std::vector<std::string>& keys, absl::Duration timeout) {
    v1::RendezvousGetRequest request;
    for (const std::string& k : keys) request.add_keys(k);
    v1::RendezvousGetResponse response;
    grpc::ClientContext context;
    Prepare(&context, timeout);
    Check("get", stub_->Get(&context, request, &response));
    if (response.values_size() != static_cast<int>(keys.size())) {
      throw gloo::IoException("rendezvous get: the server returned a wrong number of values");
    }
    return response;
  }

  std::unique_ptr<v1::Rendezvous::Stub> stub_;
  const absl::Duration timeout_;
};

}  // namespace

std::unique_ptr<gloo::rendezvous::Store> MakeRendezvousStore(const std::string& target,
                                                             absl::Duration timeout) {
  return std::make_unique<GrpcStore>(target, timeout);
}

}  // namespace pagellm
