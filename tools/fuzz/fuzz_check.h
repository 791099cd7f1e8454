// FUZZ_CHECK(cond): a fuzz target's invariant. When it fails, prints where and what, then aborts
// so that libFuzzer records the input as a crash.
#ifndef PAGELLM_TOOLS_FUZZ_FUZZ_CHECK_H_
#define PAGELLM_TOOLS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

#endif  // PAGELLM_TOOLS_FUZZ_FUZZ_CHECK_H_
