// The project's one logging library is spdlog. This header fixes how it is used:
//   PLOG_INFO("loaded {} tensors", n);
// Never log prompt or completion text: customers' data must not reach logs by default.
#ifndef PAGELLM_COMMON_LOGGING_H_
#define PAGELLM_COMMON_LOGGING_H_

#include <cstdio>
#include <cstdlib>

#include "spdlog/spdlog.h"

namespace pagellm {
// Sends logs to stderr (stdout carries program output) at `level` ("info", "warn", "debug"...).
void InitLogging(const char* level = "info");
}  // namespace pagellm

#define PLOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define PLOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define PLOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define PLOG_ERROR(...) ::spdlog::error(__VA_ARGS__)

// Crash on a broken internal invariant (never on client input: use absl::Status for that).
// Writes straight to stderr so the message survives whatever state the logger is in.
#define PAGELLM_CHECK(cond, ...)                                                         \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "CHECK failed at %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, \
                   ::fmt::format(__VA_ARGS__).c_str());                                  \
      std::fflush(stderr);                                                               \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

#endif  // PAGELLM_COMMON_LOGGING_H_
