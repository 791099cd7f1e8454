// SafetensorsFile: a read-only, memory-mapped .safetensors file (Hugging Face's format).
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON, then the data section.
// The JSON header is an object mapping tensor names to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the data section), plus an optional "__metadata__" object
// of string values.
//
// The file is hostile input. Open() validates everything before returning: N is capped and must
// fit the file; the header is a valid JSON object without duplicate keys; each tensor has a
// known dtype, a shape of non-negative integers whose byte size is overflow-checked and equals
// end - begin; and the tensors' byte ranges tile the data section exactly (sorted by offset,
// each begins where the previous ended, the last ends at the end of the file: no overlap, no
// hole, no trailing bytes). A bad file gives InvalidArgument naming the tensor; I/O problems
// give NotFound / PermissionDenied / Internal. After a successful Open() every accessor is safe.
//
// Thread-safe after construction (all methods are const).
#ifndef PAGELLM_WORKER_MODEL_SAFETENSORS_FILE_H_
#define PAGELLM_WORKER_MODEL_SAFETENSORS_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace pagellm {

class MappedFile;

// Element types named by the safetensors format. Only kF32, kF16 and kBF16 are supported by
// the model loader; the others parse (so a file that holds, say, an I64 position-id buffer
// still opens) but GetFloatTensor() refuses them.
enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kF8E4M3,
  kF8E5M2,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

// The header spelling ("F32", "BF16", ...) of `dtype`.
std::string_view SafetensorsDtypeName(SafetensorsDtype dtype);
// Bytes per element of `dtype` (1 for kBool and the fp8 types).
int64_t SafetensorsDtypeSize(SafetensorsDtype dtype);
// True for kF32, kF16 and kBF16.
bool IsSupportedFloatDtype(SafetensorsDtype dtype);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype;
  std::vector<int64_t> shape;  // row-major; shape.back() is the contiguous dimension
  int64_t num_elements = 0;    // product of shape (1 for a scalar, shape {})
  uint64_t offset = 0;         // relative to the start of the data section
  uint64_t nbytes = 0;         // num_elements * dtype size
  // Points into the mapping; valid while the SafetensorsFile lives. Only byte-aligned in
  // general (the format does not promise alignment): read through memcpy.
  const uint8_t* data = nullptr;
};

// Caps applied while parsing a header.
struct SafetensorsLimits {
  uint64_t max_header_bytes = 100ull << 20;  // the reference implementation's cap
  int max_dims = 8;
  int max_json_depth = 4;  // a header needs 3 levels; deeper nesting is hostile
};

class SafetensorsFile {
 public:
  using Limits = SafetensorsLimits;

  // Maps `path` read-only and validates it. Errors: NotFound / PermissionDenied / Internal for
  // I/O, InvalidArgument for a malformed file. The error message names `path`.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path,
                                                               const Limits& limits = Limits());
  // Validates an in-memory copy (for tests and fuzzing). The SafetensorsFile owns `bytes`.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> FromBytes(
      std::string bytes, const Limits& limits = Limits());

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // Tensors in header order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // The tensor called `name`, any dtype; nullptr when absent.
  const SafetensorsTensor* Find(std::string_view name) const;
  // The tensor called `name` if its dtype is F32, F16 or BF16. NotFound when absent,
  // Unimplemented naming the dtype otherwise.
  absl::StatusOr<const SafetensorsTensor*> GetFloatTensor(std::string_view name) const;
  // The "__metadata__" entries in header order (empty when absent).
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  // Where the file came from ("<memory>" for FromBytes); for error messages.
  const std::string& source() const { return source_; }

 private:
  SafetensorsFile() = default;
  absl::Status Parse(const Limits& limits);

  std::string source_;
  std::unique_ptr<MappedFile> bytes_;  // the file's bytes (mapped or owned)
  const uint8_t* base_ = nullptr;      // bytes_->data()
  uint64_t size_ = 0;                  // bytes_->size()
  std::vector<SafetensorsTensor> tensors_;
  absl::flat_hash_map<std::string, size_t> index_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_SAFETENSORS_FILE_H_
