// The walk reads tags and lengths with protobuf's CodedInputStream and looks each field number
// up in the message's descriptor: `string` fields are checked for UTF-8, message fields walked
// recursively, everything else (numbers, packed arrays, bytes, unknown fields) skipped. Repeated
// fields are numbered in order of appearance, which is their index after parsing.
#include "common/api/wire_request.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace pagellm {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

constexpr int kMaxDepth = 32;

enum class Walk { kOk, kBadUtf8, kMalformed };

struct Walker {
  std::string bad_field;  // path of the first string field that is not UTF-8

  Walk Message(CodedInputStream* in, const Descriptor* type, const std::string& path, int depth) {
    if (depth > kMaxDepth) return Walk::kMalformed;
    absl::flat_hash_map<int, int> seen;  // field number -> occurrences so far
    std::string scratch;
    while (true) {
      const uint32_t tag = in->ReadTag();
      if (tag == 0) return in->ConsumedEntireMessage() ? Walk::kOk : Walk::kMalformed;
      const int number = WireFormatLite::GetTagFieldNumber(tag);
      const FieldDescriptor* field = type->FindFieldByNumber(number);
      const bool delimited =
          WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
      if (field == nullptr || !delimited ||
          (field->type() != FieldDescriptor::TYPE_STRING &&
           field->type() != FieldDescriptor::TYPE_MESSAGE)) {
        if (!WireFormatLite::SkipField(in, tag)) return Walk::kMalformed;
        continue;
      }
      std::string name = path.empty() ? field->name() : absl::StrCat(path, ".", field->name());
      if (field->is_repeated()) absl::StrAppend(&name, "[", seen[number]++, "]");
      uint32_t length = 0;
      if (!in->ReadVarint32(&length)) return Walk::kMalformed;
      if (field->type() == FieldDescriptor::TYPE_STRING) {
        if (!in->ReadString(&scratch, static_cast<int>(length))) return Walk::kMalformed;
        if (!IsValidUtf8(std::string_view(scratch))) {
          bad_field = std::move(name);
          return Walk::kBadUtf8;
        }
        continue;
      }
      const CodedInputStream::Limit limit = in->PushLimit(static_cast<int>(length));
      const Walk w = Message(in, field->message_type(), name, depth + 1);
      if (w != Walk::kOk) return w;
      if (!in->ConsumedEntireMessage()) return Walk::kMalformed;
      in->PopLimit(limit);
    }
  }
};

absl::Status NotA(const google::protobuf::Message& message) {
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a ", message.GetDescriptor()->full_name()));
}

}  // namespace

absl::Status ParseRequestWire(std::string_view wire, google::protobuf::Message* message) {
  message->Clear();
  if (wire.size() > static_cast<size_t>(INT32_MAX)) return NotA(*message);
  CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()), static_cast<int>(wire.size()));
  Walker walker;
  switch (walker.Message(&in, message->GetDescriptor(), "", 0)) {
    case Walk::kBadUtf8:
      return absl::InvalidArgumentError(absl::StrCat(walker.bad_field, " is not valid UTF-8"));
    case Walk::kMalformed:
      return NotA(*message);
    case Walk::kOk:
      break;
  }
  if (!message->ParseFromArray(wire.data(), static_cast<int>(wire.size()))) return NotA(*message);
  return absl::OkStatus();
}

absl::Status ParseRequestWire(const grpc::ByteBuffer& wire, google::protobuf::Message* message) {
  std::vector<grpc::Slice> slices;
  if (!wire.Dump(&slices).ok()) return absl::InvalidArgumentError("unreadable request");
  if (slices.size() == 1) {
    return ParseRequestWire(
        std::string_view(reinterpret_cast<const char*>(slices[0].begin()), slices[0].size()),
        message);
  }
  std::string bytes;
  bytes.reserve(wire.Length());
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return ParseRequestWire(std::string_view(bytes), message);
}

}  // namespace pagellm
