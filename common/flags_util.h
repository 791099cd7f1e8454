// Command-line helpers shared by the pagellm tools.
#ifndef PAGELLM_COMMON_FLAGS_UTIL_H_
#define PAGELLM_COMMON_FLAGS_UTIL_H_

#include <string>
#include <string_view>
#include <vector>

namespace pagellm::cli {

// Rewrites "--max-tokens=3" / "--max-tokens" to absl's "--max_tokens" spelling (flag names
// only, never values), and pulls every occurrence of the repeatable flags in `repeated` out of
// argv into `collected` (in order). Returns the rewritten argv storage.
std::vector<std::string> NormalizeArgs(int argc, char** argv,
                                       const std::vector<std::string>& repeated,
                                       std::vector<std::vector<std::string>>* collected);

// NormalizeArgs, then absl::ParseCommandLine (which exits with a message on a bad flag).
// Every program calls it first, so it also sets what programs (not tests) run with: absl Mutex
// deadlock detection off (see flags_util.cc).
// Returns the values of each repeatable flag in `repeated`, in order.
std::vector<std::vector<std::string>> ParseFlags(int argc, char** argv,
                                                 const std::vector<std::string>& repeated = {});

// Whether the last ParseFlags saw flag `name` (absl's spelling, "max_tokens") on the command line,
// whatever its value: a flag left off may take a default from elsewhere (a model's). Not
// thread-safe against a concurrent ParseFlags (programs call that once, first).
bool FlagGiven(std::string_view name);

}  // namespace pagellm::cli

#endif  // PAGELLM_COMMON_FLAGS_UTIL_H_
