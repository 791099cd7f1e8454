// GGUF parsing.
//
// Layout (all little-endian): magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
// kv_count x {string key, u32 value_type, value}, tensor_count x {string name, u32 n_dims,
// u64 dims[n_dims], u32 ggml_type, u64 offset}, padding to `general.alignment`, data section.
// A string is a u64 byte length followed by the bytes (no terminator).
//
// Invariants: every read goes through Cursor, which never reads past `size_`; every size
// computation uses the checked helpers below; nothing is allocated in proportion to a count
// read from the file before that count has been checked against both a Limits cap and the
// number of bytes that remain. Errors name the key or tensor and the byte offset.
#include "worker/model/gguf_file.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "worker/model/mapped_file.h"

namespace pagellm {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GgufFile reads little-endian fields with memcpy; add byte swapping for this host");

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kHardMaxDims = 4;

// Debian's Abseil has its own string_view, which absl::StrCat needs.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Invalid(uint64_t offset, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("GGUF: ", what, " (byte offset ", offset, ")"));
}

bool CheckedMul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

// Rounds `x` up to a multiple of `align` (a power of two); false on overflow.
bool CheckedAlignUp(uint64_t x, uint64_t align, uint64_t* out) {
  uint64_t bumped = 0;
  if (!CheckedAdd(x, align - 1, &bumped)) return false;
  *out = bumped & ~(align - 1);
  return true;
}

// Checks a key or tensor name; `what` is "key" or "tensor name".
absl::Status ValidateName(absl::string_view name, absl::string_view what, uint64_t offset) {
  if (name.empty()) return Invalid(offset, absl::StrCat("empty ", what));
  if (name.find('\0') != absl::string_view::npos) {
    return Invalid(offset, absl::StrCat(what, " '", absl::CEscape(name), "' contains NUL"));
  }
  if (!IsValidUtf8(std::string_view(name.data(), name.size()))) {
    return Invalid(offset, absl::StrCat(what, " '", absl::CEscape(name), "' is not valid UTF-8"));
  }
  return absl::OkStatus();
}

absl::string_view ValueTypeName(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

// Bytes that one value of type `t` occupies at least (strings: the length field; arrays: the
// element type and count). Used to reject counts that cannot fit in the remaining bytes.
uint64_t MinEncodedSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
    case GgufValueType::kString:
      return 8;
    case GgufValueType::kArray:
      return 12;
  }
  return 1;
}

// Bounds-checked little-endian reader over [base, base + size).
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}

  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  // Reads one fixed-size field; `what` names it in the error.
  template <typename T>
  absl::Status Read(T* out, absl::string_view what) {
    if (remaining() < sizeof(T)) return Truncated(sizeof(T), what);
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadString(uint64_t max_len, absl::string_view what, std::string* out) {
    const uint64_t start = pos_;
    uint64_t len = 0;
    RETURN_IF_ERROR(Read(&len, what));
    if (len > max_len) {
      return Invalid(start, absl::StrCat(what, ": length ", len, " exceeds the limit ", max_len));
    }
    if (len > remaining()) return Truncated(len, what);
    out->assign(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }

  absl::Status Truncated(uint64_t need, absl::string_view what) const {
    return Invalid(pos_, absl::StrCat("file truncated reading ", what, ": need ", need, " bytes, ",
                                      remaining(), " left"));
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// Parses metadata values; holds the per-file array budget.
class ValueParser {
 public:
  ValueParser(Cursor* cursor, const GgufFile::Limits& limits) : c_(*cursor), limits_(limits) {}

  // Reads a value of `type` for `key` into `out`. `depth` is the array nesting level of the
  // value being read (0 for a value directly under a key).
  absl::Status Parse(GgufValueType type, absl::string_view key, int depth, GgufValue* out) {
    out->type = type;
    switch (type) {
      case GgufValueType::kUint8:
        return ReadAs<uint8_t, uint64_t>(key, out);
      case GgufValueType::kInt8:
        return ReadAs<int8_t, int64_t>(key, out);
      case GgufValueType::kUint16:
        return ReadAs<uint16_t, uint64_t>(key, out);
      case GgufValueType::kInt16:
        return ReadAs<int16_t, int64_t>(key, out);
      case GgufValueType::kUint32:
        return ReadAs<uint32_t, uint64_t>(key, out);
      case GgufValueType::kInt32:
        return ReadAs<int32_t, int64_t>(key, out);
      case GgufValueType::kUint64:
        return ReadAs<uint64_t, uint64_t>(key, out);
      case GgufValueType::kInt64:
        return ReadAs<int64_t, int64_t>(key, out);
      case GgufValueType::kFloat32:
        return ReadAs<float, double>(key, out);
      case GgufValueType::kFloat64:
        return ReadAs<double, double>(key, out);
      case GgufValueType::kBool: {
        const uint64_t at = c_.offset();
        uint8_t b = 0;
        RETURN_IF_ERROR(c_.Read(&b, What(key)));
        if (b > 1) {
          return Invalid(at,
                         absl::StrCat("key '", key, "': bool value ", int{b}, " is not 0 or 1"));
        }
        out->v = b == 1;
        return absl::OkStatus();
      }
      case GgufValueType::kString: {
        std::string s;
        RETURN_IF_ERROR(c_.ReadString(limits_.max_string_bytes, What(key), &s));
        out->v = std::move(s);
        return absl::OkStatus();
      }
      case GgufValueType::kArray:
        return ParseArray(key, depth + 1, out);
    }
    return absl::InternalError("unreachable: value type validated by the caller");
  }

  // Reads a u32 value type and checks that it is known.
  absl::Status ReadType(absl::string_view key, GgufValueType* out) {
    const uint64_t at = c_.offset();
    uint32_t raw = 0;
    RETURN_IF_ERROR(c_.Read(&raw, absl::StrCat("value type of key '", key, "'")));
    if (raw > static_cast<uint32_t>(GgufValueType::kFloat64)) {
      return Invalid(at, absl::StrCat("key '", key, "': unknown value type ", raw));
    }
    *out = static_cast<GgufValueType>(raw);
    return absl::OkStatus();
  }

 private:
  static std::string What(absl::string_view key) {
    return absl::StrCat("value of key '", key, "'");
  }

  template <typename Stored, typename Widened>
  absl::Status ReadAs(absl::string_view key, GgufValue* out) {
    Stored x{};
    RETURN_IF_ERROR(c_.Read(&x, What(key)));
    out->v = static_cast<Widened>(x);
    return absl::OkStatus();
  }

  absl::Status ParseArray(absl::string_view key, int depth, GgufValue* out) {
    const uint64_t at = c_.offset();
    if (depth > limits_.max_array_depth) {
      return Invalid(
          at, absl::StrCat("key '", key, "': arrays nested deeper than ", limits_.max_array_depth));
    }
    GgufValueType elem_type = GgufValueType::kUint8;
    RETURN_IF_ERROR(ReadType(key, &elem_type));
    uint64_t count = 0;
    RETURN_IF_ERROR(c_.Read(&count, absl::StrCat("array length of key '", key, "'")));
    if (count > limits_.max_array_elems) {
      return Invalid(at, absl::StrCat("key '", key, "': array length ", count,
                                      " exceeds the limit ", limits_.max_array_elems));
    }
    uint64_t min_bytes = 0;
    if (!CheckedMul(count, MinEncodedSize(elem_type), &min_bytes) || min_bytes > c_.remaining()) {
      return c_.Truncated(min_bytes, absl::StrCat("array of ", count, " ", ValueTypeName(elem_type),
                                                  " for key '", key, "'"));
    }
    if (!CheckedAdd(total_array_elems_, count, &total_array_elems_) ||
        total_array_elems_ > limits_.max_total_array_elems) {
      return Invalid(at, absl::StrCat("key '", key, "': more than ", limits_.max_total_array_elems,
                                      " array elements in the file"));
    }
    out->elem_type = elem_type;
    std::vector<GgufValue> elems(count);
    for (GgufValue& e : elems) RETURN_IF_ERROR(Parse(elem_type, key, depth, &e));
    out->v = std::move(elems);
    return absl::OkStatus();
  }

  Cursor& c_;
  const GgufFile::Limits& limits_;
  uint64_t total_array_elems_ = 0;
};

// Reads the optional `general.alignment` value; checks that it is a nonzero power of two.
absl::StatusOr<uint64_t> AlignmentFrom(const GgufValue* v) {
  if (v == nullptr) return kDefaultAlignment;
  absl::StatusOr<int64_t> a = v->AsInt();
  if (!a.ok() || *a <= 0 || !std::has_single_bit(static_cast<uint64_t>(*a))) {
    return absl::InvalidArgumentError(
        "GGUF: key 'general.alignment' must be an integer that is a nonzero power of two");
  }
  return static_cast<uint64_t>(*a);
}

}  // namespace

// ---- GgufValue ----

bool GgufValue::IsInteger() const {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<int64_t> GgufValue::AsInt() const {
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat("value ", *u, " does not fit in int64"));
    }
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  return absl::InvalidArgumentError(
      absl::StrCat("expected an integer, found ", ValueTypeName(type)));
}

absl::StatusOr<double> GgufValue::AsFloat() const {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return absl::InvalidArgumentError(absl::StrCat("expected a number, found ", ValueTypeName(type)));
}

absl::StatusOr<std::string_view> GgufValue::AsString() const {
  if (const auto* s = std::get_if<std::string>(&v)) return std::string_view(*s);
  return absl::InvalidArgumentError(absl::StrCat("expected a string, found ", ValueTypeName(type)));
}

absl::StatusOr<bool> GgufValue::AsBool() const {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return absl::InvalidArgumentError(absl::StrCat("expected a bool, found ", ValueTypeName(type)));
}

const std::vector<GgufValue>* GgufValue::AsArray() const {
  return std::get_if<std::vector<GgufValue>>(&v);
}

// ---- GgufFile: construction ----

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path,
                                                         const Limits& limits) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> bytes, MappedFile::Open(path, "GGUF"));
  if (bytes->size() == 0)
    return absl::InvalidArgumentError(absl::StrCat("GGUF: ", path, " is empty"));
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->bytes_ = std::move(bytes);
  file->base_ = file->bytes_->data();
  file->size_ = file->bytes_->size();
  absl::Status s = file->Parse(limits);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(s.message(), " in ", path));
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBytes(std::string bytes,
                                                              const Limits& limits) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->bytes_ = MappedFile::FromBytes(std::move(bytes));
  file->base_ = file->bytes_->data();
  file->size_ = file->bytes_->size();
  RETURN_IF_ERROR(file->Parse(limits));
  return file;
}

GgufFile::~GgufFile() = default;

// ---- GgufFile: parsing ----

absl::Status GgufFile::Parse(const Limits& limits) {
  Cursor c(base_, size_);
  uint32_t magic = 0;
  RETURN_IF_ERROR(c.Read(&magic, "magic"));
  if (magic != kGgufMagic) return Invalid(0, "bad magic (not a GGUF file)");
  RETURN_IF_ERROR(c.Read(&version_, "version"));
  if (version_ == 1) return Invalid(4, "GGUF version 1 is not supported (only 2 and 3)");
  if (version_ != 2 && version_ != 3) {
    const bool swapped = version_ == 0x02000000 || version_ == 0x03000000;
    return Invalid(4, absl::StrCat("unsupported GGUF version ", version_,
                                   swapped ? " (a big-endian file?)" : ""));
  }
  uint64_t tensor_count = 0, kv_count = 0;
  RETURN_IF_ERROR(c.Read(&tensor_count, "tensor count"));
  RETURN_IF_ERROR(c.Read(&kv_count, "metadata count"));
  if (tensor_count > limits.max_tensors) {
    return Invalid(
        8, absl::StrCat("tensor count ", tensor_count, " exceeds the limit ", limits.max_tensors));
  }
  if (kv_count > limits.max_kv) {
    return Invalid(16,
                   absl::StrCat("metadata count ", kv_count, " exceeds the limit ", limits.max_kv));
  }

  // Metadata. Each record takes at least 8 (key length) + 1 + 4 (type) + 1 bytes.
  if (kv_count > c.remaining() / 14) return c.Truncated(kv_count * 14, "metadata");
  kv_.reserve(kv_count);
  ValueParser values(&c, limits);
  for (uint64_t i = 0; i < kv_count; ++i) {
    const uint64_t at = c.offset();
    std::string key;
    RETURN_IF_ERROR(c.ReadString(limits.max_string_bytes, absl::StrCat("key #", i), &key));
    RETURN_IF_ERROR(ValidateName(key, "key", at));
    if (!kv_index_.emplace(key, kv_.size()).second) {
      return Invalid(at, absl::StrCat("duplicate key '", key, "'"));
    }
    GgufValue value;
    RETURN_IF_ERROR(values.ReadType(key, &value.type));
    RETURN_IF_ERROR(values.Parse(value.type, key, 0, &value));
    kv_.emplace_back(std::move(key), std::move(value));
  }
  ASSIGN_OR_RETURN(alignment_, AlignmentFrom(Find("general.alignment")));

  // Tensor infos. Each takes at least 8 + 1 (name) + 4 + 8 (one dim) + 4 + 8 bytes.
  if (tensor_count > c.remaining() / 33) return c.Truncated(tensor_count * 33, "tensor infos");
  tensors_.reserve(tensor_count);
  const int max_dims = std::clamp(limits.max_dims, 1, kHardMaxDims);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    const uint64_t at = c.offset();
    GgufTensorInfo t;
    RETURN_IF_ERROR(
        c.ReadString(limits.max_string_bytes, absl::StrCat("name of tensor #", i), &t.name));
    RETURN_IF_ERROR(ValidateName(t.name, "tensor name", at));
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      return Invalid(at, absl::StrCat("duplicate tensor name '", t.name, "'"));
    }
    const std::string what = absl::StrCat("tensor '", t.name, "'");
    const uint64_t dims_at = c.offset();
    uint32_t n_dims = 0;
    RETURN_IF_ERROR(c.Read(&n_dims, what));
    if (n_dims == 0 || n_dims > static_cast<uint32_t>(max_dims)) {
      return Invalid(dims_at,
                     absl::StrCat(what, ": ", n_dims, " dims (allowed 1..", max_dims, ")"));
    }
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim_at = c.offset();
      uint64_t dim = 0;
      RETURN_IF_ERROR(c.Read(&dim, what));
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Invalid(dim_at, absl::StrCat(what, ": dim ", d, " is ", static_cast<int64_t>(dim),
                                            " (must be positive)"));
      }
      if (!CheckedMul(elems, dim, &elems) ||
          elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Invalid(dim_at, absl::StrCat(what, ": element count overflows"));
      }
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    t.num_elements = static_cast<int64_t>(elems);
    const uint64_t type_at = c.offset();
    uint32_t raw_type = 0;
    RETURN_IF_ERROR(c.Read(&raw_type, what));
    const GgmlTypeTraits traits = GetGgmlTypeTraits(raw_type);
    if (traits.name.empty()) {
      return Invalid(type_at, absl::StrCat(what, ": unknown ggml type ", raw_type));
    }
    t.type = static_cast<GgmlType>(raw_type);
    if (t.dims[0] % traits.block_elems != 0) {
      return Invalid(dims_at,
                     absl::StrCat(what, ": row size ", t.dims[0], " is not a multiple of the ",
                                  Sv(traits.name), " block size ", traits.block_elems));
    }
    // elems is a multiple of block_elems because dims[0] is.
    if (!CheckedMul(elems / traits.block_elems, traits.block_bytes, &t.nbytes)) {
      return Invalid(dims_at, absl::StrCat(what, ": byte size overflows"));
    }
    const uint64_t offset_at = c.offset();
    RETURN_IF_ERROR(c.Read(&t.offset, what));
    if (t.offset % alignment_ != 0) {
      return Invalid(offset_at, absl::StrCat(what, ": data offset ", t.offset,
                                             " is not a multiple of the alignment ", alignment_));
    }
    tensors_.push_back(std::move(t));
  }

  // Data section: every tensor inside the file, no two overlapping.
  uint64_t data_start = 0;
  if (!CheckedAlignUp(c.offset(), alignment_, &data_start)) {
    return Invalid(c.offset(), "data section start overflows");
  }
  for (GgufTensorInfo& t : tensors_) {
    uint64_t begin = 0, end = 0;
    if (!CheckedAdd(data_start, t.offset, &begin) || !CheckedAdd(begin, t.nbytes, &end) ||
        end > size_) {
      return Invalid(data_start, absl::StrCat("tensor '", t.name, "': data at offset ", t.offset,
                                              " (+", t.nbytes,
                                              " bytes) extends past the end of "
                                              "the file (",
                                              size_, " bytes)"));
    }
    t.data = base_ + begin;
  }
  data_start_ = data_start;
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& prev = tensors_[order[k - 1]];
    const GgufTensorInfo& cur = tensors_[order[k]];
    if (prev.offset + prev.nbytes > cur.offset) {  // no overflow: both checked above
      return Invalid(data_start + cur.offset,
                     absl::StrCat("tensors '", prev.name, "' and '", cur.name, "' overlap"));
    }
  }
  return absl::OkStatus();
}

// ---- GgufFile: lookups ----

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(Sv(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {

template <typename T>
absl::StatusOr<T> Typed(const GgufValue* v, std::string_view key,
                        absl::StatusOr<T> (GgufValue::*get)() const) {
  if (v == nullptr) {
    return absl::NotFoundError(absl::StrCat("GGUF: key '", Sv(key), "' not found"));
  }
  absl::StatusOr<T> r = (v->*get)();
  if (!r.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF: key '", Sv(key), "': ", r.status().message()));
  }
  return r;
}

}  // namespace

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  return Typed(Find(key), key, &GgufValue::AsInt);
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  return Typed(Find(key), key, &GgufValue::AsFloat);
}

absl::StatusOr<std::string_view> GgufFile::GetString(std::string_view key) const {
  return Typed(Find(key), key, &GgufValue::AsString);
}

void GgufFile::DropPages(const void* p, uint64_t n) const { bytes_->DropPages(p, n); }

void GgufFile::ReleaseMetadataArrays() {
  for (auto& [key, value] : kv_) {
    if (auto* a = std::get_if<std::vector<GgufValue>>(&value.v)) std::vector<GgufValue>().swap(*a);
  }
  DropPages(base_, std::min(data_start_, size_));
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(Sv(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace pagellm
