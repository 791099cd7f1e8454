#include "common/shared_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace pagellm {

absl::StatusOr<SharedLibrary> SharedLibrary::Open(std::initializer_list<const char*> sonames,
                                                  const std::string& what,
                                                  const std::string& hint) {
  std::string errors;
  for (const char* name : sonames) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL); handle != nullptr) {
      return SharedLibrary(handle, what);
    }
    const char* e = dlerror();
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", e != nullptr ? e : name);
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot load ", what, " (", errors, "); ", hint));
}

void* SharedLibrary::Symbol(const char* symbol) const { return dlsym(handle_, symbol); }

absl::Status SharedLibrary::Missing(const char* symbol) const {
  return absl::FailedPreconditionError(absl::StrCat(what_, " has no ", symbol));
}

}  // namespace pagellm
