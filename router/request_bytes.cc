#include "router/request_bytes.h"

#include "common/api/wire_request.h"

namespace pagellm {

absl::StatusOr<v1::GenerateRequest> ParseGenerateRequest(std::string_view wire) {
  v1::GenerateRequest request;
  if (absl::Status s = ParseRequestWire(wire, &request); !s.ok()) return s;
  return request;
}

absl::StatusOr<v1::GenerateRequest> ParseGenerateRequest(const grpc::ByteBuffer& wire) {
  v1::GenerateRequest request;
  if (absl::Status s = ParseRequestWire(wire, &request); !s.ok()) return s;
  return request;
}

}  // namespace pagellm
