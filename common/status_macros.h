// Early-return helpers for absl::Status / absl::StatusOr (Debian's Abseil has none).
#ifndef PAGELLM_COMMON_STATUS_MACROS_H_
#define PAGELLM_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PAGELLM_CONCAT_INNER_(a, b) a##b
#define PAGELLM_CONCAT_(a, b) PAGELLM_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status pagellm_status_ = (expr);           \
    if (!pagellm_status_.ok()) return pagellm_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, Foo());` assigns the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(PAGELLM_CONCAT_(pagellm_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#endif  // PAGELLM_COMMON_STATUS_MACROS_H_
