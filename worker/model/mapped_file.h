// MappedFile: the read-only bytes of a model file, memory-mapped (or owned, for tests). The one
// place that opens and maps files for the GGUF and safetensors readers.
//
// Thread-safe after construction (immutable).
#ifndef PAGELLM_WORKER_MODEL_MAPPED_FILE_H_
#define PAGELLM_WORKER_MODEL_MAPPED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pagellm {

class MappedFile {
 public:
  // Maps `path` with PROT_READ / MAP_PRIVATE. Errors, naming `what` and the path: NotFound,
  // PermissionDenied, Internal (other I/O); InvalidArgument when it is not a regular file.
  // An empty file maps to data() == nullptr, size() == 0.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path,
                                                          const std::string& what);
  // Owns `bytes` (tests, fuzzing).
  static std::unique_ptr<MappedFile> FromBytes(std::string bytes);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

  // Gives the pages wholly inside [p, p + n) back to the OS (madvise MADV_DONTNEED), for a
  // reader that keeps its own copy of those bytes: they no longer count in the process's
  // resident memory, and are read from the file again if touched. The bytes do not change.
  // No-op for owned bytes and for the part of the range outside the file.
  void DropPages(const void* p, uint64_t n) const;

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;  // when mapped
  std::string owned_;        // when built FromBytes
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_MAPPED_FILE_H_
