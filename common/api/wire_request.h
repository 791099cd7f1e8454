// ParseRequestWire: a request message from its wire bytes, for gRPC methods registered as raw
// (ByteBuffer) methods. protobuf refuses to parse a proto3 `string` field that is not UTF-8,
// and a typed gRPC method then answers with an empty status that names nothing; here the wire
// is first walked with the message's schema so that the client gets INVALID_ARGUMENT naming the
// first bad field ("chat.messages[2].content is not valid UTF-8"), and bytes that are not the
// message at all get "the request is not a pagellm.v1.X".
//
// Thread-safe: pure functions.
#ifndef PAGELLM_COMMON_API_WIRE_REQUEST_H_
#define PAGELLM_COMMON_API_WIRE_REQUEST_H_

#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace pagellm {

// Parses `wire` into *message (cleared first). Returns OK, or InvalidArgument as above.
// Nesting deeper than 32 messages is refused the same way.
absl::Status ParseRequestWire(std::string_view wire, google::protobuf::Message* message);
absl::Status ParseRequestWire(const grpc::ByteBuffer& wire, google::protobuf::Message* message);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_API_WIRE_REQUEST_H_
