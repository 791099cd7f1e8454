// libFuzzer target for the raw request parsers: router/request_bytes.h (ParseGenerateRequest,
// from a string_view and from a grpc::ByteBuffer) and the schema walk under it,
// common/api/wire_request.h (ParseRequestWire), run on every *Request message of
// generation.proto and worker.proto.
//
// Invariants (abort() when one fails): an error is InvalidArgument; ParseRequestWire succeeds
// exactly when protobuf's own ParseFromArray does (the walk only names the bad field first) and
// gives the same message; that message serializes and parses back to itself; the ByteBuffer
// overloads (the input cut into three slices) agree with the string_view ones.
//
// Build and run: see tools/fuzz/run_ci.sh (seeds in tools/fuzz/seeds/request_bytes_fuzz/, made by
// tools/fuzz/make_seeds.py; dictionary tools/fuzz/request_bytes.dict).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/api/wire_request.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "pagellm/v1/generation.pb.h"
#include "pagellm/v1/worker.pb.h"
#include "router/request_bytes.h"
#include "tools/fuzz/fuzz_check.h"

namespace {

// The prototypes of every message named *Request in the two request-carrying .proto files.
const std::vector<const google::protobuf::Message*>& RequestTypes() {
  static const auto* types = [] {
    auto* out = new std::vector<const google::protobuf::Message*>;
    for (const google::protobuf::FileDescriptor* file :
         {pagellm::v1::GenerateRequest::descriptor()->file(),
          pagellm::v1::WorkerGenerateRequest::descriptor()->file()}) {
      for (int i = 0; i < file->message_type_count(); ++i) {
        const google::protobuf::Descriptor* d = file->message_type(i);
        const std::string& name = d->name();
        if (name.size() < 7 || name.compare(name.size() - 7, 7, "Request") != 0) continue;
        out->push_back(google::protobuf::MessageFactory::generated_factory()->GetPrototype(d));
      }
    }
    return out;
  }();
  return *types;
}

// The wire bytes as a ByteBuffer of three slices, cut where the input's size says.
grpc::ByteBuffer ToByteBuffer(std::string_view wire) {
  const size_t a = (wire.size() * 7919) % (wire.size() + 1);
  const size_t b = a + (wire.size() - a) / 2;
  grpc::Slice slices[3] = {grpc::Slice(wire.data(), a), grpc::Slice(wire.data() + a, b - a),
                           grpc::Slice(wire.data() + b, wire.size() - b)};
  return grpc::ByteBuffer(slices, 3);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // protobuf logs every string field that is not UTF-8; that would flood the output.
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  RequestTypes();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view wire(reinterpret_cast<const char*>(data), size);
  const grpc::ByteBuffer buffer = ToByteBuffer(wire);

  for (const google::protobuf::Message* prototype : RequestTypes()) {
    std::unique_ptr<google::protobuf::Message> walked(prototype->New());
    const absl::Status status = pagellm::ParseRequestWire(wire, walked.get());
    std::unique_ptr<google::protobuf::Message> plain(prototype->New());
    const bool plain_ok = plain->ParseFromArray(wire.data(), static_cast<int>(wire.size()));
    FUZZ_CHECK(status.ok() == plain_ok);
    std::unique_ptr<google::protobuf::Message> from_buffer(prototype->New());
    FUZZ_CHECK(pagellm::ParseRequestWire(buffer, from_buffer.get()) == status);
    if (!status.ok()) {
      FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument);
      continue;
    }
    const std::string bytes = walked->SerializeAsString();
    FUZZ_CHECK(plain->SerializeAsString() == bytes);
    FUZZ_CHECK(from_buffer->SerializeAsString() == bytes);
    std::unique_ptr<google::protobuf::Message> again(prototype->New());
    FUZZ_CHECK(pagellm::ParseRequestWire(bytes, again.get()).ok());
    FUZZ_CHECK(again->SerializeAsString() == bytes);
  }

  auto request = pagellm::ParseGenerateRequest(wire);
  auto from_buffer = pagellm::ParseGenerateRequest(buffer);
  FUZZ_CHECK(request.status() == from_buffer.status());
  pagellm::v1::GenerateRequest reference;
  FUZZ_CHECK(request.status() == pagellm::ParseRequestWire(wire, &reference));
  if (request.ok()) {
    const std::string bytes = request->SerializeAsString();
    FUZZ_CHECK(from_buffer->SerializeAsString() == bytes);
    FUZZ_CHECK(reference.SerializeAsString() == bytes);
  }
  return 0;
}
