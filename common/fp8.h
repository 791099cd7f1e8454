// OCP 8-bit floats, the two formats vLLM's --kv-cache-dtype fp8_e4m3 / fp8_e5m2 store (PyTorch's
// float8_e4m3fn and float8_e5m2, ml_dtypes' of the same names):
//   E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; finite to +-448, subnormals from 2^-9,
//         no infinities, 0x7f / 0xff NaN.
//   E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits; the top byte of an IEEE fp16, so
//         finite to +-57344, 0x7c infinity, 0x7d..0x7f NaN.
// Float -> fp8 rounds to nearest even and saturates to the largest finite value (as vLLM's
// CUDA kernels convert with __NV_SATFINITE), so a cache never holds an infinity; NaN stays NaN.
// Fp8 -> float is exact. Every E4M3 value is an fp16 times 2^8 (its low 7 bits shifted left by
// 7 under the sign): the vector kernels widen through F16C that way.
// Thread-safe: pure functions.
#ifndef PAGELLM_COMMON_FP8_H_
#define PAGELLM_COMMON_FP8_H_

#include <cstdint>

namespace pagellm {

float Fp8E4M3ToFloat(uint8_t b);
float Fp8E5M2ToFloat(uint8_t b);
uint8_t FloatToFp8E4M3(float f);
uint8_t FloatToFp8E5M2(float f);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_FP8_H_
