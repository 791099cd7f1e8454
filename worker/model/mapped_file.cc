#include "worker/model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pagellm {
namespace {

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path,
                                                             const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat(what, ": cannot open ", path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, absl::StrCat(what, ": cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", path, " is not a regular file"));
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(err, absl::StrCat(what, ": cannot map ", path));
    }
    file->mapping_ = p;
    file->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file referenced
  return file;
}

std::unique_ptr<MappedFile> MappedFile::FromBytes(std::string bytes) {
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->owned_ = std::move(bytes);
  file->data_ = reinterpret_cast<const uint8_t*>(file->owned_.data());
  file->size_ = file->owned_.size();
  return file;
}

void MappedFile::DropPages(const void* p, uint64_t n) const {
  if (mapping_ == nullptr || p == nullptr) return;
  const uint64_t base = reinterpret_cast<uintptr_t>(data_);
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  uint64_t begin = reinterpret_cast<uintptr_t>(p);
  uint64_t end = begin + n;
  if (end < begin || end <= base || begin >= base + size_) return;
  begin = std::max(begin, base);
  end = std::min(end, base + size_);
  begin = (begin + page - 1) / page * page;
  end = end / page * page;
  if (end > begin) {
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);  // advisory
  }
}

MappedFile::~MappedFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

}  // namespace pagellm
