// Run-time CPU feature detection for kernel dispatch. Thread-safe (computed once).
#ifndef PAGELLM_KERNELS_CPU_CPU_FEATURES_H_
#define PAGELLM_KERNELS_CPU_CPU_FEATURES_H_

namespace pagellm::kernels {

struct CpuFeatures {
  bool avx512 = false;  // AVX-512 F/BW/VL/DQ + VNNI + FMA + F16C: the fast kernel set.
  // AVX2 + FMA + F16C: the kernels for x86 CPUs without AVX-512 (true also where avx512 is; a
  // kernel with both paths prefers AVX-512). PAGELLM_NO_AVX512=1 turns avx512 (and AMX) off, to
  // run the AVX2 kernels on an AVX-512 machine.
  bool avx2 = false;
  // AMX tiles with bf16 (and AVX512-BF16), permitted by the OS for this process; off with
  // PAGELLM_NO_AMX=1 (to compare the paths) or PAGELLM_PORTABLE_KERNELS=1.
  bool amx_bf16 = false;
  bool amx_int8 = false;  // AMX tiles with int8, likewise
  // AVX512-BF16 (`vdpbf16ps`) with the avx512 set; off with PAGELLM_NO_AVX512=1.
  bool avx512_bf16 = false;
};

// Features of this CPU, unless PAGELLM_PORTABLE_KERNELS=1 is set in the environment (then all
// false, forcing the portable kernels; tests use this to compare the two paths).
const CpuFeatures& GetCpuFeatures();

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_CPU_FEATURES_H_
