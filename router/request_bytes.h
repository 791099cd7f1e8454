// ParseGenerateRequest: a Generate request from its wire bytes, with the text fields checked for
// valid UTF-8 first, so that a bad one is reported as INVALID_ARGUMENT naming the field instead
// of failing inside protobuf (common/api/wire_request.h). Thread-compatible (a pure function).
#ifndef PAGELLM_ROUTER_REQUEST_BYTES_H_
#define PAGELLM_ROUTER_REQUEST_BYTES_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "pagellm/v1/generation.pb.h"

namespace pagellm {

// InvalidArgument for bytes that are not a GenerateRequest, or whose request_id, text, chat
// roles and contents or stop strings are not valid UTF-8 (the message names the field).
absl::StatusOr<v1::GenerateRequest> ParseGenerateRequest(std::string_view wire);
absl::StatusOr<v1::GenerateRequest> ParseGenerateRequest(const grpc::ByteBuffer& wire);

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_REQUEST_BYTES_H_
