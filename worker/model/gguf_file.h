// GgufFile: a read-only, memory-mapped GGUF (v2/v3) model file.
//
// The file is hostile input. Open() validates everything before returning: every count and
// string length is capped, every size computation is overflow-checked, every tensor's data lies
// inside the file, tensors do not overlap, offsets honour `general.alignment`. A bad file gives
// an absl::InvalidArgumentError (or NotFound / Internal for I/O) naming what is wrong; never a
// crash. After a successful Open() all accessors are safe without further checks.
//
// Accepted: GGUF v2 and v3, little-endian. Metadata keys are non-empty, valid UTF-8 without
// NUL, and unique; tensor names likewise. `general.alignment`, when present, is an integer
// that is a nonzero power of two (default 32); the data section starts at the first multiple
// of it after the tensor infos and every tensor offset is a multiple of it.
//
// Thread-safe after construction (all methods are const).
#ifndef PAGELLM_WORKER_MODEL_GGUF_FILE_H_
#define PAGELLM_WORKER_MODEL_GGUF_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/ggml_type.h"

namespace pagellm {

class MappedFile;

// GGUF metadata value types, numbered as in the file format.
// clang-format off
enum class GgufValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
// clang-format on

// One metadata value. Scalars are widened (integers to int64/uint64, floats to double);
// `type` keeps the type stored in the file. Arrays hold homogeneous elements of `elem_type`
// (nested arrays allowed up to a small depth).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType elem_type = GgufValueType::kUint8;  // valid when type == kArray
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<GgufValue>> v;

  bool IsInteger() const;
  // Returns the integer value if it is an integer type in range, else an error. AsFloat accepts
  // any numeric type (integers are converted); the other accessors require the exact kind.
  absl::StatusOr<int64_t> AsInt() const;
  absl::StatusOr<double> AsFloat() const;  // any numeric type
  absl::StatusOr<std::string_view> AsString() const;
  absl::StatusOr<bool> AsBool() const;
  const std::vector<GgufValue>* AsArray() const;  // nullptr when not an array
};

// Validated on load: a non-empty UTF-8 name without NUL, 1..4 dims each >= 1, a known GGML
// type, dims[0] a multiple of the type's block size, data inside the file and not overlapping
// another tensor's.
struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the contiguous (row) dimension.
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t nbytes = 0;  // checked: elements / block_elems * block_bytes
  int64_t num_elements = 0;
  const uint8_t* data = nullptr;  // points into the mapping; valid while the GgufFile lives
};

// Caps applied while parsing (GgufFile::Limits). Declared outside the class because GCC
// rejects a nested struct with member initializers as a default argument of its enclosing class.
struct GgufLimits {
  uint64_t max_tensors = 1 << 16;
  uint64_t max_kv = 1 << 16;
  uint64_t max_string_bytes = 1 << 20;       // one key or string value
  uint64_t max_array_elems = 1 << 24;        // e.g. a 256k-token vocabulary fits
  uint64_t max_total_array_elems = 1 << 26;  // over all arrays: bounds memory per file
  int max_array_depth = 4;                   // an array directly under a key has depth 1
  int max_dims = 4;                          // values above 4 are treated as 4
};

class GgufFile {
 public:
  using Limits = GgufLimits;

  // Maps `path` read-only and parses it. Errors: NotFound / PermissionDenied for I/O,
  // InvalidArgument for a malformed file.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path,
                                                        const Limits& limits = Limits());
  // Parses an in-memory copy (for tests and fuzzing). The GgufFile owns `bytes`.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBytes(std::string bytes,
                                                             const Limits& limits = Limits());

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }

  // Metadata lookup; nullptr when absent.
  const GgufValue* Find(std::string_view key) const;
  // Typed lookups: NotFound when absent, InvalidArgument on a type mismatch.
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<std::string_view> GetString(std::string_view key) const;
  // In file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // MappedFile::DropPages over the file's bytes (tensor data a backend has copied).
  void DropPages(const void* p, uint64_t n) const;
  // nullptr when absent.
  const GgufTensorInfo* FindTensor(std::string_view name) const;

  // Frees every array value of the metadata (a vocabulary's tokens, merges, scores and types:
  // megabytes once parsed) and gives back the mapped pages before the tensor data. For a loader
  // that has read the vocabulary and configuration: afterwards those arrays read as empty;
  // scalars, strings and tensors stay. Not thread-safe against concurrent lookups.
  void ReleaseMetadataArrays();

 private:
  GgufFile() = default;
  absl::Status Parse(const Limits& limits);

  std::unique_ptr<MappedFile> bytes_;  // the file's bytes (mapped or owned)
  const uint8_t* base_ = nullptr;      // bytes_->data()
  uint64_t size_ = 0;                  // bytes_->size()
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_start_ = 0;  // the tensor data section's offset
  std::vector<std::pair<std::string, GgufValue>> kv_;
  absl::flat_hash_map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_GGUF_FILE_H_
