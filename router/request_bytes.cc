#include "router/request_bytes.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "pagellm/v1/lenient.pb.h"

namespace pagellm {
namespace {

absl::Status CheckUtf8(const std::string& bytes, const std::string& field) {
  if (IsValidUtf8(std::string_view(bytes))) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " is not valid UTF-8"));
}

}  // namespace

absl::StatusOr<v1::GenerateRequest> ParseGenerateRequest(std::string_view wire) {
  v1::lenient::GenerateRequest lenient;
  if (!lenient.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    return absl::InvalidArgumentError("the request is not a pagellm.v1.GenerateRequest");
  }
  if (absl::Status s = CheckUtf8(lenient.request_id(), "request_id"); !s.ok()) return s;
  if (absl::Status s = CheckUtf8(lenient.text(), "text"); !s.ok()) return s;
  for (int i = 0; i < lenient.chat().messages_size(); ++i) {
    const auto& m = lenient.chat().messages(i);
    const std::string at = absl::StrCat("chat.messages[", i, "].");
    if (absl::Status s = CheckUtf8(m.role(), at + "role"); !s.ok()) return s;
    if (absl::Status s = CheckUtf8(m.content(), at + "content"); !s.ok()) return s;
  }
  for (int i = 0; i < lenient.sampling().stop_size(); ++i) {
    const std::string field = absl::StrCat("sampling.stop[", i, "]");
    if (absl::Status s = CheckUtf8(lenient.sampling().stop(i), field); !s.ok()) return s;
  }
  v1::GenerateRequest request;
  if (!request.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    return absl::InvalidArgumentError("the request is not a pagellm.v1.GenerateRequest");
  }
  return request;
}

absl::StatusOr<v1::GenerateRequest> ParseGenerateRequest(const grpc::ByteBuffer& wire) {
  std::vector<grpc::Slice> slices;
  if (!wire.Dump(&slices).ok()) return absl::InvalidArgumentError("unreadable request");
  std::string bytes;
  bytes.reserve(wire.Length());
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return ParseGenerateRequest(std::string_view(bytes));
}

}  // namespace pagellm
