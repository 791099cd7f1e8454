#include "router/generation_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/api/proto_convert.h"
#include "common/api/wire_request.h"
#include "router/request_bytes.h"
#include "router/request_validator.h"

namespace pagellm {
namespace {

const grpc::Status& Unauthenticated() {
  static const grpc::Status s(grpc::StatusCode::UNAUTHENTICATED,
                              "a valid API key is required (metadata authorization: Bearer KEY)");
  return s;
}

const grpc::Status& NotReady() {
  static const grpc::Status s(grpc::StatusCode::UNAVAILABLE,
                              "the router has not reached a worker yet");
  return s;
}

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::Status SerializeResponse(const google::protobuf::Message& m, grpc::ByteBuffer* out) {
  bool own = false;
  const grpc::Status s =
      grpc::SerializationTraits<google::protobuf::Message>::Serialize(m, out, &own);
  return FromGrpcStatus(s);
}

// A raw unary method: parse (INVALID_ARGUMENT naming the problem), run `body`, serialize.
template <typename Request, typename Response>
grpc::ServerUnaryReactor* ServeRaw(grpc::CallbackServerContext* context, const ModelContext* m,
                                   const grpc::ByteBuffer& wire, grpc::ByteBuffer* out,
                                   absl::Status (*body)(const ModelContext&, const Request&,
                                                        Response*)) {
  if (m == nullptr) return FinishUnary(context, FromGrpcStatus(NotReady()));
  Request request;
  Response response;
  absl::Status s = ParseRequestWire(wire, &request);
  if (s.ok()) s = body(*m, request, &response);
  if (s.ok()) s = SerializeResponse(response, out);
  return FinishUnary(context, s);
}

}  // namespace

GenerationService::GenerationService(AdmissionQueue* queue, WorkerPool* pool,
                                     RouterMetrics* metrics, absl::Duration request_timeout,
                                     const ReloadableSecrets* api_keys)
    : metrics_(metrics), api_keys_(api_keys) {
  deps_.queue = queue;
  deps_.pool = pool;
  deps_.metrics = metrics;
  deps_.request_timeout = request_timeout;
  deps_.on_done = [this] { StreamDone(); };
}

void GenerationService::SetModel(std::shared_ptr<ModelContext> model) {
  absl::MutexLock lock(&model_mu_);
  model_ = std::move(model);
}

std::shared_ptr<ModelContext> GenerationService::model() const {
  absl::MutexLock lock(&model_mu_);
  return model_;
}

bool GenerationService::WaitForStreams(absl::Time deadline) {
  absl::MutexLock lock(&streams_mu_);
  return streams_mu_.AwaitWithDeadline(absl::Condition(
                                           +[](int* n) { return *n == 0; }, &open_streams_),
                                       deadline);
}

int GenerationService::open_streams() const {
  absl::MutexLock lock(&streams_mu_);
  return open_streams_;
}

bool GenerationService::Authorized(const grpc::CallbackServerContext* context) const {
  if (api_keys_ == nullptr) return true;
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  const std::string_view value = it == metadata.end()
                                     ? std::string_view()
                                     : std::string_view(it->second.data(), it->second.size());
  return api_keys_->Allows(SecretSet::BearerToken(value));
}

void GenerationService::StreamDone() {
  absl::MutexLock lock(&streams_mu_);
  --open_streams_;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* wire) {
  if (!Authorized(context)) return new RejectedGenerateReactor(metrics_, Unauthenticated());
  const std::shared_ptr<const ModelContext> m = model();
  if (m == nullptr) return new RejectedGenerateReactor(metrics_, NotReady());
  if (draining_.load(std::memory_order_acquire)) {
    return new RejectedGenerateReactor(
        metrics_, grpc::Status(grpc::StatusCode::UNAVAILABLE, "the router is shutting down"));
  }
  absl::StatusOr<v1::GenerateRequest> request = ParseGenerateRequest(*wire);
  if (!request.ok()) return new RejectedGenerateReactor(metrics_, ToGrpcStatus(request.status()));
  {
    absl::MutexLock lock(&streams_mu_);
    ++open_streams_;
  }
  return new GenerateReactor(deps_, *m, context, *request);
}

absl::StatusOr<std::unique_ptr<RoutedStream>> GenerationService::Open(
    const v1::GenerateRequest& request, absl::Time client_deadline, RoutedStream::Client* client) {
  const std::shared_ptr<const ModelContext> m = model();
  absl::Status refused;
  if (m == nullptr) {
    refused = FromGrpcStatus(NotReady());
  } else if (draining_.load(std::memory_order_acquire)) {
    refused = absl::UnavailableError("the router is shutting down");
  }
  if (!refused.ok()) {
    metrics_->CountRequest(static_cast<grpc::StatusCode>(refused.code()));
    return refused;
  }
  {
    absl::MutexLock lock(&streams_mu_);
    ++open_streams_;
  }
  return std::make_unique<RoutedStream>(deps_, *m, request, client_deadline, client);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* wire,
                                                      grpc::ByteBuffer* out) {
  if (!Authorized(context)) return FinishUnary(context, FromGrpcStatus(Unauthenticated()));
  return ServeRaw(context, model().get(), *wire, out, &AnswerTokenize);
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* wire,
                                                        grpc::ByteBuffer* out) {
  if (!Authorized(context)) return FinishUnary(context, FromGrpcStatus(Unauthenticated()));
  return ServeRaw(context, model().get(), *wire, out, &AnswerDetokenize);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetModelInfoRequest*,
                                                          v1::ModelInfo* response) {
  if (!Authorized(context)) return FinishUnary(context, FromGrpcStatus(Unauthenticated()));
  const std::shared_ptr<const ModelContext> m = model();
  if (m == nullptr) return FinishUnary(context, FromGrpcStatus(NotReady()));
  *response = m->CurrentInfo();
  return FinishUnary(context, absl::OkStatus());
}

}  // namespace pagellm
