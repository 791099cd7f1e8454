#include "kernels/cpu/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace pagellm::kernels {
namespace {

bool EnvIs(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

// The kernel's permission to use AMX's tile data state: Linux grants it per process on request
// (arch_prctl ARCH_REQ_XCOMP_PERM); a guest kernel may refuse it although CPUID lists AMX.
bool AmxTilesPermitted() {
  constexpr long kArchReqXcompPerm = 0x1023, kArchGetXcompPerm = 0x1022;
  constexpr int kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long permitted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &permitted) != 0) return false;
  return (permitted >> kXfeatureXtiledata) & 1;
}

struct AmxFeatures {
  bool bf16 = false, int8 = false;
};

// CPUID leaf 7: EDX bit 24 AMX-TILE, 22 AMX-BF16, 25 AMX-INT8; subleaf 1 EAX bit 5 AVX512-BF16
// (which rounds the bf16 kernel's activations); then the permission.
AmxFeatures Amx() {
  AmxFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool tile = (d >> 24) & 1, bf16 = (d >> 22) & 1, int8 = (d >> 25) & 1;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return f;
  const bool avx512_bf16 = (a >> 5) & 1;
  if (!tile || !AmxTilesPermitted()) return f;
  f.bf16 = bf16 && avx512_bf16;
  f.int8 = int8;
  return f;
}

}  // namespace

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
    if (EnvIs("PAGELLM_PORTABLE_KERNELS", "1")) return f;
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    f.avx512 = f.avx2 && !EnvIs("PAGELLM_NO_AVX512", "1") && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") &&
               __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
    if (f.avx512 && !EnvIs("PAGELLM_NO_AMX", "1")) {
      const AmxFeatures amx = Amx();
      f.amx_bf16 = amx.bf16;
      f.amx_int8 = amx.int8;
    }
    return f;
  }();
  return features;
}

}  // namespace pagellm::kernels
