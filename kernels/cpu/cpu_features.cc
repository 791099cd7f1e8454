#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace pagellm::kernels {

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
    const char* portable = std::getenv("PAGELLM_PORTABLE_KERNELS");
    if (portable != nullptr && std::strcmp(portable, "1") == 0) return f;
    __builtin_cpu_init();
    f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    return f;
  }();
  return features;
}

}  // namespace pagellm::kernels
