#include "common/testing/grpc_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/impl/codegen/client_unary_call.h"
#include "grpcpp/impl/codegen/sync_stream.h"

namespace pagellm::testing {
namespace {

using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Length-delimited field `number` holding `value`.
std::string LengthDelimited(int number, const std::string& value) {
  std::string out;
  out.push_back(static_cast<char>((number << 3) | 2));
  size_t n = value.size();
  do {
    uint8_t b = n & 0x7f;
    n >>= 7;
    out.push_back(static_cast<char>(n ? b | 0x80 : b));
  } while (n);
  return out + value;
}

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  if (!buffer.DumpToSingleSlice(&slice).ok()) return {};
  return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
}

absl::Status ToAbsl(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

auto Deadline() { return std::chrono::system_clock::now() + std::chrono::seconds(5); }

}  // namespace

absl::StatusOr<HealthStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                         const std::string& service) {
  grpc::internal::RpcMethod method("/grpc.health.v1.Health/Check",
                                   grpc::internal::RpcMethod::NORMAL_RPC);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  grpc::ByteBuffer response;
  grpc::Status s = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel.get(), method, &context,
      ToBuffer(service.empty() ? std::string() : LengthDelimited(1, service)), &response);
  if (!s.ok()) return ToAbsl(s);
  UnknownFieldSet fields;
  if (!fields.ParseFromString(FromBuffer(response))) {
    return absl::InternalError("unparsable HealthCheckResponse");
  }
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() == 1 && fields.field(i).type() == UnknownField::TYPE_VARINT) {
      return static_cast<HealthStatus>(fields.field(i).varint());
    }
  }
  return HealthStatus::kUnknown;
}

grpc::Status CallRaw(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& request, std::string* response) {
  grpc::internal::RpcMethod rpc(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  grpc::ByteBuffer reply;
  grpc::Status s = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel.get(), rpc, &context, ToBuffer(request), &reply);
  if (s.ok()) *response = FromBuffer(reply);
  return s;
}

absl::StatusOr<std::vector<std::string>> ListServices(
    const std::shared_ptr<grpc::Channel>& channel) {
  grpc::internal::RpcMethod method("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                                   grpc::internal::RpcMethod::BIDI_STREAMING);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), method, &context));
  // ServerReflectionRequest{list_services (7): ""}.
  stream->Write(ToBuffer(LengthDelimited(7, "")));
  stream->WritesDone();
  grpc::ByteBuffer response;
  std::vector<std::string> names;
  bool got = false;
  while (stream->Read(&response)) {
    got = true;
    UnknownFieldSet top;
    if (!top.ParseFromString(FromBuffer(response))) continue;
    for (int i = 0; i < top.field_count(); ++i) {
      // list_services_response (6) { repeated ServiceResponse service (1) { name (1) } }.
      if (top.field(i).number() != 6 ||
          top.field(i).type() != UnknownField::TYPE_LENGTH_DELIMITED) {
        continue;
      }
      UnknownFieldSet list;
      list.ParseFromString(top.field(i).length_delimited());
      for (int j = 0; j < list.field_count(); ++j) {
        if (list.field(j).number() != 1) continue;
        UnknownFieldSet service;
        service.ParseFromString(list.field(j).length_delimited());
        for (int k = 0; k < service.field_count(); ++k) {
          if (service.field(k).number() == 1) names.push_back(service.field(k).length_delimited());
        }
      }
    }
  }
  grpc::Status s = stream->Finish();
  if (!s.ok()) return ToAbsl(s);
  if (!got) return absl::InternalError("no reflection response");
  return names;
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("write");
  }
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) reply.append(buf, n);
  close(fd);
  const size_t body = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.1 200", 0) != 0 && reply.rfind("HTTP/1.0 200", 0) != 0) {
    return absl::UnavailableError(absl::StrCat("HTTP reply: ", reply.substr(0, reply.find('\r'))));
  }
  return body == std::string::npos ? std::string() : reply.substr(body + 4);
}

}  // namespace pagellm::testing
