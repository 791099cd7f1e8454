#include "router/generate_reactor.h"

#include <chrono>

#include "common/api/proto_convert.h"
#include "common/logging.h"

namespace pagellm {

GenerateReactor::GenerateReactor(const RoutedStream::Deps& deps, const ModelContext& model,
                                 grpc::CallbackServerContext* context,
                                 const v1::GenerateRequest& request) {
  const auto deadline = context->deadline();
  stream_ = std::make_unique<RoutedStream>(deps, model, request,
                                           deadline == std::chrono::system_clock::time_point::max()
                                               ? absl::InfiniteFuture()
                                               : absl::FromChrono(deadline),
                                           this);
  stream_->Start();  // may Finish at once: the reactor is not bound yet, so it stays
}

bool GenerateReactor::StartWrite(const v1::GenerateResponse& m) {
  bool own = false;
  wire_.Clear();  // the previous write is done; the serializer wants an empty buffer
  const grpc::Status st =
      grpc::SerializationTraits<v1::GenerateResponse>::Serialize(m, &wire_, &own);
  PAGELLM_CHECK(st.ok(), "serializing a GenerateResponse failed: {}", st.error_message());
  grpc::ServerWriteReactor<grpc::ByteBuffer>::StartWrite(&wire_);
  return false;  // OnWriteDone follows
}

void GenerateReactor::Finish(const absl::Status& status) {
  grpc::ServerWriteReactor<grpc::ByteBuffer>::Finish(ToGrpcStatus(status));
}

RejectedGenerateReactor::RejectedGenerateReactor(RouterMetrics* metrics,
                                                 const grpc::Status& status) {
  metrics->CountRequest(status.error_code());
  Finish(status);
}

}  // namespace pagellm
