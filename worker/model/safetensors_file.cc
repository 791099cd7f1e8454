// SafetensorsFile parsing. Design: the whole file is mapped (or owned) up front; Parse() reads
// only the header and checks every tensor's byte range against the data section, then sorts the
// ranges and walks them once to prove they tile the section exactly. Only after that succeeds
// are `data` pointers handed out, so every accessor reads bytes known to be in the file.
#include "worker/model/safetensors_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json/strict_json.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/model/mapped_file.h"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;

// Debian's Abseil keeps its own string_view type; StrCat and the hash containers need it.
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

struct DtypeInfo {
  std::string_view name;
  SafetensorsDtype dtype;
  int64_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {"BOOL", SafetensorsDtype::kBool, 1},      {"U8", SafetensorsDtype::kU8, 1},
    {"I8", SafetensorsDtype::kI8, 1},          {"F8_E4M3", SafetensorsDtype::kF8E4M3, 1},
    {"F8_E5M2", SafetensorsDtype::kF8E5M2, 1}, {"I16", SafetensorsDtype::kI16, 2},
    {"U16", SafetensorsDtype::kU16, 2},        {"F16", SafetensorsDtype::kF16, 2},
    {"BF16", SafetensorsDtype::kBF16, 2},      {"I32", SafetensorsDtype::kI32, 4},
    {"U32", SafetensorsDtype::kU32, 4},        {"F32", SafetensorsDtype::kF32, 4},
    {"F64", SafetensorsDtype::kF64, 8},        {"I64", SafetensorsDtype::kI64, 8},
    {"U64", SafetensorsDtype::kU64, 8},
};

std::optional<SafetensorsDtype> ParseDtype(std::string_view name) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

// Reads a non-negative JSON integer; nullopt for anything else (negative, float, bool, ...).
std::optional<uint64_t> AsUnsigned(const Json& v) {
  if (!v.is_number_unsigned()) return std::nullopt;
  return v.get<uint64_t>();
}

}  // namespace

std::string_view SafetensorsDtypeName(SafetensorsDtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

int64_t SafetensorsDtypeSize(SafetensorsDtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d.size;
  }
  return 0;
}

bool IsSupportedFloatDtype(SafetensorsDtype dtype) {
  return dtype == SafetensorsDtype::kF32 || dtype == SafetensorsDtype::kF16 ||
         dtype == SafetensorsDtype::kBF16;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path,
                                                                       const Limits& limits) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> bytes, MappedFile::Open(path, "safetensors"));
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->source_ = path;
  file->bytes_ = std::move(bytes);
  file->base_ = file->bytes_->data();
  file->size_ = file->bytes_->size();
  RETURN_IF_ERROR(file->Parse(limits));
  return file;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBytes(std::string bytes,
                                                                            const Limits& limits) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->source_ = "<memory>";
  file->bytes_ = MappedFile::FromBytes(std::move(bytes));
  file->base_ = file->bytes_->data();
  file->size_ = file->bytes_->size();
  RETURN_IF_ERROR(file->Parse(limits));
  return file;
}

SafetensorsFile::~SafetensorsFile() = default;

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(absl::string_view(name.data(), name.size()));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<const SafetensorsTensor*> SafetensorsFile::GetFloatTensor(
    std::string_view name) const {
  const SafetensorsTensor* t = Find(name);
  if (t == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("safetensors ", source_, ": no tensor '", Absl(name), "'"));
  }
  if (!IsSupportedFloatDtype(t->dtype)) {
    return absl::UnimplementedError(absl::StrCat(
        "safetensors ", source_, ": tensor '", Absl(name), "' has dtype ",
        Absl(SafetensorsDtypeName(t->dtype)), "; only F32, F16 and BF16 are supported"));
  }
  return t;
}

absl::Status SafetensorsFile::Parse(const Limits& limits) {
  auto bad = [this](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors ", source_, ": ", parts...));
  };
  if (size_ < 8) return bad("file has ", size_, " bytes, fewer than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base_[i];
  if (header_len > limits.max_header_bytes) {
    return bad("header length ", header_len, " exceeds the cap of ", limits.max_header_bytes);
  }
  if (header_len > size_ - 8) {
    return bad("header length ", header_len, " exceeds the ", size_ - 8, " bytes after it");
  }
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size_ - data_start;
  std::string_view text(reinterpret_cast<const char*>(base_ + 8), header_len);
  StrictJsonOptions json_options;
  json_options.max_depth = limits.max_json_depth;
  auto parsed = ParseStrictJson(text, json_options);
  if (!parsed.ok()) return bad("header: ", parsed.status().message());
  const Json& root = *parsed;
  if (!root.is_object()) return bad("header is not a JSON object");

  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return bad("__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) return bad("__metadata__ '", key, "' is not a string");
        metadata_.emplace_back(key, value.get<std::string>());
      }
      continue;
    }
    // A plain reference for the lambda: capturing a structured binding needs P1091, which clang
    // implements only from version 16 (the fuzzers build with Debian's clang 14).
    const std::string& tensor_name = name;
    auto bad_tensor = [&](auto&&... parts) {
      return bad("tensor '", tensor_name, "': ", parts...);
    };
    if (!entry.is_object()) return bad_tensor("entry is not an object");
    SafetensorsTensor t;
    t.name = name;

    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) {
      return bad_tensor("missing or non-string dtype");
    }
    std::optional<SafetensorsDtype> dtype = ParseDtype(dtype_it->get<std::string>());
    if (!dtype) return bad_tensor("unknown dtype '", dtype_it->get<std::string>(), "'");
    t.dtype = *dtype;

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end() || !shape_it->is_array()) return bad_tensor("missing shape");
    if (shape_it->size() > static_cast<size_t>(limits.max_dims)) {
      return bad_tensor("shape has ", shape_it->size(), " dims, more than ", limits.max_dims);
    }
    uint64_t elements = 1;
    for (const Json& dim : *shape_it) {
      std::optional<uint64_t> d = AsUnsigned(dim);
      if (!d) return bad_tensor("shape entry ", dim.dump(), " is not a non-negative integer");
      if (__builtin_mul_overflow(elements, *d, &elements) ||
          elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return bad_tensor("shape ", shape_it->dump(), " overflows");
      }
      t.shape.push_back(static_cast<int64_t>(*d));
    }
    t.num_elements = static_cast<int64_t>(elements);
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(SafetensorsDtypeSize(t.dtype)),
                               &t.nbytes)) {
      return bad_tensor("byte size of shape ", shape_it->dump(), " overflows");
    }

    auto offsets_it = entry.find("data_offsets");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
      return bad_tensor("data_offsets is not a [begin, end] pair");
    }
    std::optional<uint64_t> begin = AsUnsigned((*offsets_it)[0]);
    std::optional<uint64_t> end = AsUnsigned((*offsets_it)[1]);
    if (!begin || !end) return bad_tensor("data_offsets are not non-negative integers");
    if (*begin > *end) return bad_tensor("data_offsets begin ", *begin, " > end ", *end);
    if (*end > data_size) {
      return bad_tensor("data_offsets end ", *end, " is past the data section of ", data_size,
                        " bytes");
    }
    if (*end - *begin != t.nbytes) {
      return bad_tensor("data_offsets span ", *end - *begin, " bytes but shape ", shape_it->dump(),
                        " of ", Absl(SafetensorsDtypeName(t.dtype)), " needs ", t.nbytes);
    }
    t.offset = *begin;
    // ParseStrictJson rejected duplicate keys, so names are unique.
    index_.emplace(name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The ranges must tile [0, data_size): sorted by (begin, end), each starts where the previous
  // one ended. Zero-byte tensors may sit at any boundary.
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [this](size_t a, size_t b) {
    const SafetensorsTensor& x = tensors_[a];
    const SafetensorsTensor& y = tensors_[b];
    return std::make_pair(x.offset, x.nbytes) < std::make_pair(y.offset, y.nbytes);
  });
  uint64_t cursor = 0;
  const SafetensorsTensor* previous = nullptr;
  for (size_t i : order) {
    const SafetensorsTensor& t = tensors_[i];
    if (t.offset < cursor) {
      return bad("tensor '", t.name, "' [", t.offset, ", ", t.offset + t.nbytes,
                 ") overlaps tensor '", previous->name, "' ending at ", cursor);
    }
    if (t.offset > cursor) {
      return bad("bytes [", cursor, ", ", t.offset, ") before tensor '", t.name,
                 "' belong to no tensor");
    }
    cursor = t.offset + t.nbytes;
    previous = &t;
  }
  if (cursor != data_size) {
    return bad("bytes [", cursor, ", ", data_size, ") at the end of the data section belong to ",
               "no tensor");
  }
  for (SafetensorsTensor& t : tensors_) t.data = base_ + data_start + t.offset;
  return absl::OkStatus();
}

}  // namespace pagellm
