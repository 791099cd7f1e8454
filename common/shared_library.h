// A shared library loaded at run time (dlopen) and its entry points, for optional device
// libraries -- cuBLAS, NCCL -- that a binary must start without.
#ifndef PAGELLM_COMMON_SHARED_LIBRARY_H_
#define PAGELLM_COMMON_SHARED_LIBRARY_H_

#include <initializer_list>
#include <string>
#include <type_traits>

#include "absl/status/statusor.h"

namespace pagellm {

class SharedLibrary {
 public:
  // Opens the first of `sonames` the loader finds (RTLD_NOW | RTLD_LOCAL); the library stays
  // loaded for the process's life. FailedPrecondition naming `what`, every dlerror() and
  // `hint` when none loads.
  static absl::StatusOr<SharedLibrary> Open(std::initializer_list<const char*> sonames,
                                            const std::string& what, const std::string& hint);

  // Sets *fn to `symbol`. FailedPrecondition naming the library and the symbol when it lacks it.
  template <typename Fn>
  absl::Status Get(Fn* fn, const char* symbol) const {
    static_assert(std::is_pointer_v<Fn>);
    void* p = Symbol(symbol);
    *fn = reinterpret_cast<Fn>(p);
    return p != nullptr ? absl::OkStatus() : Missing(symbol);
  }

 private:
  SharedLibrary(void* handle, std::string what) : handle_(handle), what_(std::move(what)) {}
  void* Symbol(const char* symbol) const;
  absl::Status Missing(const char* symbol) const;

  void* handle_;
  std::string what_;
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_SHARED_LIBRARY_H_
